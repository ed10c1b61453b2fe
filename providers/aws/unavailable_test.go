package aws

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	testingclock "k8s.io/utils/clock/testing"
)

func TestUnavailableOfferingsExpire(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	u := NewUnavailableOfferings(clk, 0)
	seq0 := u.SeqNum()
	u.MarkUnavailable("m5.large", "us-east-1a", "spot")
	seq1 := u.SeqNum()
	if seq1 == seq0 {
		t.Error("SeqNum did not change when an offering was marked")
	}
	for _, tc := range []struct {
		it, zone, ct string
		want         bool
	}{
		{"m5.large", "us-east-1a", "spot", true},
		{"m5.large", "us-east-1a", "on-demand", false},
		{"m5.large", "us-east-1b", "spot", false},
		{"m5.xlarge", "us-east-1a", "spot", false},
	} {
		if got := u.IsUnavailable(tc.it, tc.zone, tc.ct); got != tc.want {
			t.Errorf("IsUnavailable(%s, %s, %s) = %v, want %v", tc.it, tc.zone, tc.ct, got, tc.want)
		}
	}
	clk.Step(DefaultUnavailableTTL - time.Second)
	if !u.IsUnavailable("m5.large", "us-east-1a", "spot") || u.SeqNum() != seq1 {
		t.Error("the entry expired, or SeqNum changed, before the TTL")
	}
	// Marking again extends the entry.
	u.MarkUnavailable("m5.large", "us-east-1a", "spot")
	clk.Step(2 * time.Second)
	if !u.IsUnavailable("m5.large", "us-east-1a", "spot") {
		t.Error("marking again did not extend the entry")
	}
	seq2 := u.SeqNum()
	clk.Step(DefaultUnavailableTTL)
	if u.IsUnavailable("m5.large", "us-east-1a", "spot") {
		t.Error("the entry outlived its TTL")
	}
	if u.SeqNum() == seq2 {
		t.Error("SeqNum did not change when the entry expired")
	}
}

func TestUnavailableCapacityTypeAndSubnet(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	u := NewUnavailableOfferings(clk, time.Minute)
	u.MarkCapacityTypeUnavailable("spot")
	u.MarkSubnetUnavailable("subnet-1")
	if !u.IsUnavailable("c5.large", "us-east-1c", "spot") || u.IsUnavailable("c5.large", "us-east-1c", "on-demand") {
		t.Error("a capacity-type-wide entry must cover every spot offering and no on-demand one")
	}
	if !u.IsSubnetUnavailable("subnet-1") || u.IsSubnetUnavailable("subnet-2") {
		t.Error("subnet entry wrong")
	}
	clk.Step(time.Minute)
	if u.IsUnavailable("c5.large", "us-east-1c", "spot") || u.IsSubnetUnavailable("subnet-1") {
		t.Error("entries outlived the custom TTL")
	}
	u.MarkUnavailable("a", "b", "c")
	u.Flush()
	if u.IsUnavailable("a", "b", "c") {
		t.Error("Flush kept an entry")
	}
}

func fleetErr(code, it, zone, subnet string, lifecycle ec2types.InstanceLifecycle) ec2types.CreateFleetError {
	o := &ec2types.FleetLaunchTemplateOverrides{InstanceType: ec2types.InstanceType(it)}
	if zone != "" {
		o.AvailabilityZone = aws.String(zone)
	}
	if subnet != "" {
		o.SubnetId = aws.String(subnet)
	}
	return ec2types.CreateFleetError{ErrorCode: aws.String(code), ErrorMessage: aws.String("no"), Lifecycle: lifecycle,
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: o}}
}

func TestParseAndRecordFleetErrors(t *testing.T) {
	zoneOf := func(id string) string { return map[string]string{"subnet-b": "us-east-1b"}[id] }
	errs := ParseFleetErrors([]ec2types.CreateFleetError{
		fleetErr("InsufficientInstanceCapacity", "m5.large", "us-east-1a", "subnet-a", ec2types.InstanceLifecycleSpot),
		fleetErr("UnfulfillableCapacity", "c5.large", "", "subnet-b", ""),
		fleetErr("InsufficientFreeAddressesInSubnet", "r5.large", "us-east-1c", "subnet-c", ec2types.InstanceLifecycleOnDemand),
		fleetErr("InvalidParameterValue", "t3.large", "us-east-1a", "subnet-a", ""),
	}, "on-demand", zoneOf)
	want := []FleetError{
		{Code: "InsufficientInstanceCapacity", Message: "no", InstanceType: "m5.large", Zone: "us-east-1a", SubnetID: "subnet-a", CapacityType: "spot"},
		{Code: "UnfulfillableCapacity", Message: "no", InstanceType: "c5.large", Zone: "us-east-1b", SubnetID: "subnet-b", CapacityType: "on-demand"},
		{Code: "InsufficientFreeAddressesInSubnet", Message: "no", InstanceType: "r5.large", Zone: "us-east-1c", SubnetID: "subnet-c", CapacityType: "on-demand"},
		{Code: "InvalidParameterValue", Message: "no", InstanceType: "t3.large", Zone: "us-east-1a", SubnetID: "subnet-a", CapacityType: "on-demand"},
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d", len(errs), len(want))
	}
	for i := range want {
		if errs[i] != want[i] {
			t.Errorf("error %d = %+v, want %+v", i, errs[i], want[i])
		}
	}
	u := NewUnavailableOfferings(testingclock.NewFakeClock(time.Now()), 0)
	if n := u.Record(errs); n != 3 {
		t.Errorf("Record recorded %d entries, want 3 (not the InvalidParameterValue)", n)
	}
	checks := []struct {
		name string
		got  bool
		want bool
	}{
		{"m5.large spot in 1a", u.IsUnavailable("m5.large", "us-east-1a", "spot"), true},
		{"m5.large on-demand in 1a", u.IsUnavailable("m5.large", "us-east-1a", "on-demand"), false},
		{"c5.large on-demand in 1b (zone from subnet)", u.IsUnavailable("c5.large", "us-east-1b", "on-demand"), true},
		{"subnet-c out of addresses", u.IsSubnetUnavailable("subnet-c"), true},
		{"r5.large itself is fine", u.IsUnavailable("r5.large", "us-east-1c", "on-demand"), false},
		{"t3.large not a capacity error", u.IsUnavailable("t3.large", "us-east-1a", "on-demand"), false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	u.Record(ParseFleetErrors([]ec2types.CreateFleetError{fleetErr("MaxSpotInstanceCountExceeded", "m5.large", "us-east-1a", "", ec2types.InstanceLifecycleSpot)}, "spot", nil))
	if !u.IsUnavailable("x1.large", "us-east-1f", "spot") {
		t.Error("MaxSpotInstanceCountExceeded must make all spot unavailable")
	}
}

func TestIsCapacityCode(t *testing.T) {
	for code, want := range map[string]bool{
		"InsufficientInstanceCapacity": true, "MaxSpotInstanceCountExceeded": true, "VcpuLimitExceeded": true,
		"UnfulfillableCapacity": true, "Unsupported": true, "InsufficientFreeAddressesInSubnet": true,
		"MaxFleetCountExceeded": true, "ReservationCapacityExceeded": true,
		"InvalidParameterValue": false, "RequestLimitExceeded": false, "": false,
	} {
		if got := IsCapacityCode(code); got != want {
			t.Errorf("IsCapacityCode(%q) = %v, want %v", code, got, want)
		}
	}
	if got := summarizeFleetErrors([]FleetError{{Code: "A"}, {Code: "B"}, {Code: "A"}}); got != "A x2, B" {
		t.Errorf("summarizeFleetErrors = %q", got)
	}
}

func TestProviderID(t *testing.T) {
	if got := ProviderID("us-east-1a", "i-0abc"); got != "aws:///us-east-1a/i-0abc" {
		t.Errorf("ProviderID = %q", got)
	}
	for in, want := range map[string]string{"aws:///us-east-1a/i-0abc": "i-0abc", "aws:///i-0abc": "i-0abc"} {
		if got, err := ParseProviderID(in); err != nil || got != want {
			t.Errorf("ParseProviderID(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"local:///us-east-1/us-east-1a/i-1", "aws:///us-east-1a/", "aws:///a/b/i-1", "aws:///us-east-1a/vol-1"} {
		if _, err := ParseProviderID(bad); err == nil {
			t.Errorf("ParseProviderID(%q) succeeded", bad)
		}
	}
}
