package awstest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// testInstanceStatus checks the front's DescribeInstanceStatus (test support for the moto gap:
// moto reports every instance healthy, without events, on one page, whatever the filters)
// through the SDK's client: what SetInstanceHealth sets comes back in EC2's shape, filtered and
// paged as EC2 does, and requests EC2 refuses are refused.
func testInstanceStatus(ctx context.Context, t *testing.T, m *Moto, env *Env) {
	ec2c := ec2.NewFromConfig(m.Config)
	run, err := ec2c.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String(env.CustomAMIs[0].ID), InstanceType: "m5.large",
		MinCount: aws.Int32(6), MaxCount: aws.Int32(6), SubnetId: aws.String(env.PrivateSubnets[0].ID)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range run.Instances {
		ids = append(ids, aws.ToString(i.InstanceId))
	}
	since := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	notBefore := since.Add(72 * time.Hour)
	m.SetInstanceHealth(ids[0], InstanceHealth{InstanceStatus: "impaired", ImpairedSince: since})
	m.SetInstanceHealth(ids[1], InstanceHealth{SystemStatus: "impaired"})
	m.SetInstanceHealth(ids[2], InstanceHealth{Events: []InstanceEvent{{Code: "instance-retirement", NotBefore: notBefore, NotAfter: notBefore.Add(time.Hour), Description: "degraded hardware"}}})
	m.SetInstanceHealth(ids[3], InstanceHealth{Events: []InstanceEvent{{Code: "system-maintenance", NotBefore: notBefore}}})
	ours := func(out []ec2types.InstanceStatus) []string {
		var got []string
		for _, s := range out {
			if id := aws.ToString(s.InstanceId); slices.Contains(ids, id) {
				got = append(got, id)
			}
		}
		slices.Sort(got)
		return got
	}
	filter := func(name string, values ...string) ec2types.Filter {
		return ec2types.Filter{Name: aws.String(name), Values: values}
	}
	sorted := func(v ...string) []string { return slices.Sorted(slices.Values(v)) }
	for _, tc := range []struct {
		name    string
		filters []ec2types.Filter
		want    []string
	}{
		{name: "no filter", want: sorted(ids...)},
		{name: "instance check impaired", filters: []ec2types.Filter{filter("instance-status.status", "impaired")}, want: ids[:1]},
		{name: "instance reachability failed", filters: []ec2types.Filter{filter("instance-status.reachability", "failed")}, want: ids[:1]},
		{name: "system check impaired", filters: []ec2types.Filter{filter("system-status.status", "impaired")}, want: ids[1:2]},
		{name: "event codes", filters: []ec2types.Filter{filter("event.code", "instance-retirement", "system-reboot")}, want: ids[2:3]},
		{name: "filters are ANDed", filters: []ec2types.Filter{filter("event.code", "system-maintenance", "instance-retirement"), filter("instance-status.status", "ok")},
			want: sorted(ids[2], ids[3])},
		{name: "nothing matches", filters: []ec2types.Filter{filter("event.code", "instance-stop")}},
	} {
		out, err := ec2c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: tc.filters})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ours(out.InstanceStatuses); !slices.Equal(got, sorted(tc.want...)) {
			t.Errorf("%s: instances %v, want %v", tc.name, got, tc.want)
		}
	}
	checkInstanceStatusShape(ctx, t, ec2c, env, ids, since, notBefore)
	checkInstanceStatusPaging(ctx, t, ec2c, ids, ours)
	m.ClearInstanceHealth(ids[0])
	out, err := ec2c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{statusFilter("instance-status.status", "impaired")}})
	if err != nil || len(ours(out.InstanceStatuses)) != 0 {
		t.Errorf("after ClearInstanceHealth: %v, %v; want the instance healthy again", ours(out.InstanceStatuses), err)
	}
}

func statusFilter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

// checkInstanceStatusShape reads an impaired and a retiring instance by ID: statuses, details
// with impairedSince, events.
func checkInstanceStatusShape(ctx context.Context, t *testing.T, ec2c *ec2.Client, env *Env, ids []string, since, notBefore time.Time) {
	t.Helper()
	out, err := ec2c.DescribeInstanceStatus(ctx, &ec2.DescribeInstanceStatusInput{InstanceIds: []string{ids[0], ids[2]}})
	if err != nil || len(out.InstanceStatuses) != 2 {
		t.Fatalf("by ID: %+v, %v", out, err)
	}
	impaired, retiring := out.InstanceStatuses[0], out.InstanceStatuses[1]
	if aws.ToString(impaired.InstanceId) != ids[0] {
		impaired, retiring = retiring, impaired
	}
	if is := impaired.InstanceStatus; is == nil || is.Status != ec2types.SummaryStatusImpaired || len(is.Details) != 1 ||
		is.Details[0].Status != ec2types.StatusTypeFailed || !aws.ToTime(is.Details[0].ImpairedSince).Equal(since) ||
		impaired.SystemStatus == nil || impaired.SystemStatus.Status != ec2types.SummaryStatusOk || aws.ToString(impaired.AvailabilityZone) != env.PrivateSubnets[0].Zone {
		t.Errorf("impaired instance: %+v", impaired)
	}
	if len(retiring.Events) != 1 {
		t.Fatalf("retiring instance events %+v", retiring.Events)
	}
	if e := retiring.Events[0]; e.Code != ec2types.EventCodeInstanceRetirement || !aws.ToTime(e.NotBefore).Equal(notBefore) ||
		!aws.ToTime(e.NotAfter).Equal(notBefore.Add(time.Hour)) || aws.ToString(e.Description) != "degraded hardware" ||
		!strings.HasPrefix(aws.ToString(e.InstanceEventId), "instance-event-") {
		t.Errorf("retirement event %+v", e)
	}
}

// checkInstanceStatusPaging reads every instance 5 a page, then sends what EC2 refuses.
func checkInstanceStatusPaging(ctx context.Context, t *testing.T, ec2c *ec2.Client, ids []string, ours func([]ec2types.InstanceStatus) []string) {
	t.Helper()
	var pages int
	var all []ec2types.InstanceStatus
	for p := ec2.NewDescribeInstanceStatusPaginator(ec2c, &ec2.DescribeInstanceStatusInput{MaxResults: aws.Int32(5)}); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.InstanceStatuses) > 5 {
			t.Errorf("a page of %d, MaxResults 5", len(page.InstanceStatuses))
		}
		pages++
		all = append(all, page.InstanceStatuses...)
	}
	if got := ours(all); pages < 2 || !slices.Equal(got, slices.Sorted(slices.Values(ids))) {
		t.Errorf("%d pages with %v, want at least 2 pages with all of %v", pages, got, ids)
	}

	// What EC2 refuses.
	for _, tc := range []struct {
		name string
		in   ec2.DescribeInstanceStatusInput
		code string
	}{
		{name: "MaxResults under 5", in: ec2.DescribeInstanceStatusInput{MaxResults: aws.Int32(4)}, code: "InvalidParameterValue"},
		{name: "MaxResults with IDs", in: ec2.DescribeInstanceStatusInput{MaxResults: aws.Int32(5), InstanceIds: ids[:1]}, code: "InvalidParameterCombination"},
		{name: "unknown filter", in: ec2.DescribeInstanceStatusInput{Filters: []ec2types.Filter{statusFilter("tag:Name", "x")}}, code: "InvalidParameterValue"},
		{name: "bad token", in: ec2.DescribeInstanceStatusInput{NextToken: aws.String("nope")}, code: "InvalidParameterValue"},
		{name: "unknown instance", in: ec2.DescribeInstanceStatusInput{InstanceIds: []string{"i-0000000000000000f"}}, code: "InvalidInstanceID.NotFound"},
		{name: "dry run", in: ec2.DescribeInstanceStatusInput{DryRun: aws.Bool(true)}, code: "DryRunOperation"},
	} {
		if _, err := ec2c.DescribeInstanceStatus(ctx, &tc.in); errorCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
}
