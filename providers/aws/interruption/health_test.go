package interruption

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tol := DefaultImpairedTolerance
	retire := ScheduledEvent{Code: "instance-retirement", NotBefore: now.Add(72 * time.Hour)}
	reboot := ScheduledEvent{Code: "system-reboot", NotBefore: now.Add(24 * time.Hour)}
	tests := []struct {
		name      string
		h         InstanceHealth
		firstSeen time.Time
		want      Decision
	}{
		{name: "healthy", h: InstanceHealth{}, want: Decision{}},
		{name: "impaired for the first time waits from now",
			h:    InstanceHealth{InstanceImpaired: true},
			want: Decision{Action: ActionWait, Category: CategoryInstanceStatus, ImpairedSince: now}},
		{name: "impaired under the tolerance waits",
			h: InstanceHealth{InstanceImpaired: true}, firstSeen: now.Add(-119 * time.Second),
			want: Decision{Action: ActionWait, Category: CategoryInstanceStatus, ImpairedSince: now.Add(-119 * time.Second)}},
		{name: "impaired for exactly the tolerance is forceful",
			h: InstanceHealth{InstanceImpaired: true}, firstSeen: now.Add(-tol),
			want: Decision{Action: ActionForceful, Category: CategoryInstanceStatus, ImpairedSince: now.Add(-tol)}},
		{name: "system impaired names the system check",
			h: InstanceHealth{SystemImpaired: true}, firstSeen: now.Add(-5 * time.Minute),
			want: Decision{Action: ActionForceful, Category: CategorySystemStatus, ImpairedSince: now.Add(-5 * time.Minute)}},
		{name: "both impaired count as system",
			h: InstanceHealth{InstanceImpaired: true, SystemImpaired: true}, firstSeen: now.Add(-tol),
			want: Decision{Action: ActionForceful, Category: CategorySystemStatus, ImpairedSince: now.Add(-tol)}},
		{name: "EC2's impairedSince survives a restart",
			h:    InstanceHealth{InstanceImpaired: true, ImpairedSince: now.Add(-10 * time.Minute)},
			want: Decision{Action: ActionForceful, Category: CategoryInstanceStatus, ImpairedSince: now.Add(-10 * time.Minute)}},
		{name: "the earlier of first seen and impairedSince counts",
			h: InstanceHealth{InstanceImpaired: true, ImpairedSince: now.Add(-time.Minute)}, firstSeen: now.Add(-3 * time.Minute),
			want: Decision{Action: ActionForceful, Category: CategoryInstanceStatus, ImpairedSince: now.Add(-3 * time.Minute)}},
		{name: "a future impairedSince is ignored",
			h:    InstanceHealth{InstanceImpaired: true, ImpairedSince: now.Add(time.Hour)},
			want: Decision{Action: ActionWait, Category: CategoryInstanceStatus, ImpairedSince: now}},
		{name: "a scheduled event is graceful at once",
			h:    InstanceHealth{Events: []ScheduledEvent{retire}},
			want: Decision{Action: ActionGraceful, Category: CategoryEventStatus, Event: &retire}},
		{name: "the event starting first is named",
			h:    InstanceHealth{Events: []ScheduledEvent{retire, reboot}},
			want: Decision{Action: ActionGraceful, Category: CategoryEventStatus, Event: &reboot}},
		{name: "an event wins over an impairment still tolerated",
			h: InstanceHealth{InstanceImpaired: true, Events: []ScheduledEvent{retire}}, firstSeen: now.Add(-time.Minute),
			want: Decision{Action: ActionGraceful, Category: CategoryEventStatus, ImpairedSince: now.Add(-time.Minute), Event: &retire}},
		{name: "an impairment past the tolerance wins over an event",
			h: InstanceHealth{SystemImpaired: true, Events: []ScheduledEvent{retire}}, firstSeen: now.Add(-tol),
			want: Decision{Action: ActionForceful, Category: CategorySystemStatus, ImpairedSince: now.Add(-tol)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.h, tt.firstSeen, now, tol); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestHealthOf(t *testing.T) {
	since := time.Date(2026, 11, 29, 11, 0, 0, 0, time.UTC)
	notBefore := since.Add(48 * time.Hour)
	summary := func(status ec2types.SummaryStatus, impairedSince *time.Time) *ec2types.InstanceStatusSummary {
		return &ec2types.InstanceStatusSummary{Status: status, Details: []ec2types.InstanceStatusDetails{
			{Name: ec2types.StatusNameReachability, Status: ec2types.StatusTypeFailed, ImpairedSince: impairedSince}}}
	}
	tests := []struct {
		name string
		in   ec2types.InstanceStatus
		want InstanceHealth
	}{
		{name: "ok", in: ec2types.InstanceStatus{InstanceId: aws.String("i-1"), InstanceStatus: summary(ec2types.SummaryStatusOk, nil), SystemStatus: summary(ec2types.SummaryStatusOk, nil)},
			want: InstanceHealth{InstanceID: "i-1"}},
		{name: "instance impaired with impairedSince", in: ec2types.InstanceStatus{InstanceId: aws.String("i-1"),
			InstanceStatus: summary(ec2types.SummaryStatusImpaired, &since), SystemStatus: summary(ec2types.SummaryStatusOk, nil)},
			want: InstanceHealth{InstanceID: "i-1", InstanceImpaired: true, ImpairedSince: since}},
		{name: "system impaired, the earliest impairedSince", in: ec2types.InstanceStatus{InstanceId: aws.String("i-1"),
			InstanceStatus: summary(ec2types.SummaryStatusImpaired, aws.Time(since.Add(time.Minute))), SystemStatus: summary(ec2types.SummaryStatusImpaired, &since)},
			want: InstanceHealth{InstanceID: "i-1", InstanceImpaired: true, SystemImpaired: true, ImpairedSince: since}},
		{name: "insufficient data is not impaired", in: ec2types.InstanceStatus{InstanceId: aws.String("i-1"), InstanceStatus: summary(ec2types.SummaryStatusInsufficientData, nil)},
			want: InstanceHealth{InstanceID: "i-1"}},
		{name: "pending events kept, completed and canceled left out", in: ec2types.InstanceStatus{InstanceId: aws.String("i-1"), Events: []ec2types.InstanceStatusEvent{
			{Code: ec2types.EventCodeInstanceRetirement, NotBefore: &notBefore, Description: aws.String("The instance is running on degraded hardware")},
			{Code: ec2types.EventCodeSystemReboot, NotBefore: &notBefore, Description: aws.String("[Completed] scheduled reboot")},
			{Code: ec2types.EventCodeInstanceStop, NotBefore: &notBefore, Description: aws.String("[Canceled] scheduled stop")},
		}}, want: InstanceHealth{InstanceID: "i-1", Events: []ScheduledEvent{{Code: "instance-retirement", NotBefore: notBefore, Description: "The instance is running on degraded hardware"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := healthOf(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("healthOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNewInstanceStatusPollerValidates(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name string
		opts InstanceStatusOptions
		want string
	}{
		{name: "no EC2", opts: InstanceStatusOptions{InstanceID: parseProviderID}, want: "an EC2 client is required"},
		{name: "no parser", opts: InstanceStatusOptions{EC2: nopStatusAPI{}}, want: "a provider ID parser is required"},
		{name: "page too small", opts: InstanceStatusOptions{EC2: nopStatusAPI{}, InstanceID: parseProviderID, PageSize: 4}, want: "PageSize 4 is out of EC2's range 5 to 1000"},
		{name: "page too large", opts: InstanceStatusOptions{EC2: nopStatusAPI{}, InstanceID: parseProviderID, PageSize: 1001}, want: "PageSize 1001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewInstanceStatusPoller(f.kube, tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("NewInstanceStatusPoller = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	p, err := NewInstanceStatusPoller(f.kube, InstanceStatusOptions{EC2: nopStatusAPI{}, InstanceID: parseProviderID})
	if err != nil {
		t.Fatal(err)
	}
	if p.opts.Interval != time.Minute || p.opts.ImpairedTolerance != 120*time.Second || p.opts.PageSize != 1000 || !p.NeedLeaderElection() {
		t.Errorf("defaults %+v, leader only %v", p.opts, p.NeedLeaderElection())
	}
}

// nopStatusAPI is an EC2 client the validation test never calls.
type nopStatusAPI struct{}

func (nopStatusAPI) DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	return &ec2.DescribeInstanceStatusOutput{}, nil
}
