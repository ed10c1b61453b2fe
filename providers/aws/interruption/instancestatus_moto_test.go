package interruption_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	testingclock "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/providers/aws"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/providers/aws/interruption"
	"github.com/joiner-dev/joiner/testsupport/controllertest"
	"github.com/joiner-dev/joiner/testsupport/metricstest"
)

// These tests run the instance-status poller as the operator does — in a manager on a real API
// server, reading DescribeInstanceStatus over HTTP with the SDK's client — against moto. moto
// reports every instance healthy with no events; the impaired checks and scheduled events come
// from awstest's SetInstanceHealth, test support filling that moto gap (in EC2's XML, with EC2's
// filters and paging).

// t0 is the fake clock's time at the poller's first poll.
var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const (
	disruptedTotal = "karpenter_nodeclaims_disrupted_total"
	unhealthyTotal = "karpenter_interruption_instance_status_unhealthy_total"
	errorsTotal    = "joiner_interruption_instance_status_errors_total"
)

// poller is a running instance-status poller with a fake clock.
type poller struct {
	clock *testingclock.FakeClock
	reg   *prometheus.Registry
}

// startPoller runs a poller with opts (EC2, parser, clock and log filled in) in a manager and
// waits for its first poll.
func startPoller(t *testing.T, opts interruption.InstanceStatusOptions) *poller {
	t.Helper()
	p := &poller{clock: testingclock.NewFakeClock(t0), reg: prometheus.NewRegistry()}
	opts.EC2, opts.InstanceID, opts.Clock, opts.Log = ec2.NewFromConfig(moto.Config), aws.ParseProviderID, p.clock, testr.New(t)
	env.StartManager(t, func(mgr ctrl.Manager) error {
		isp, err := interruption.NewInstanceStatusPoller(mgr.GetClient(), opts)
		if err != nil {
			return err
		}
		if err := isp.RegisterMetrics(p.reg); err != nil {
			return err
		}
		return isp.SetupWithManager(mgr)
	})
	p.waitPolled(t)
	return p
}

// waitPolled waits until the poller has finished a poll and waits on the clock again.
func (p *poller) waitPolled(t *testing.T) {
	t.Helper()
	controllertest.Eventually(t, 30*time.Second, "the poll to finish", func(context.Context) error {
		if !p.clock.HasWaiters() {
			return errors.New("still polling")
		}
		return nil
	})
}

// step advances the fake clock by the poller's wait and waits for the poll it starts.
func (p *poller) step(t *testing.T, d time.Duration) {
	t.Helper()
	p.clock.Step(d)
	p.waitPolled(t)
}

// launch runs n instances in moto and returns their IDs.
func launch(t *testing.T, n int32) []string {
	t.Helper()
	out, err := ec2.NewFromConfig(moto.Config).RunInstances(context.Background(), &ec2.RunInstancesInput{
		ImageId: awssdk.String(account.CustomAMIs[0].ID), InstanceType: "m5.large", MinCount: awssdk.Int32(n), MaxCount: awssdk.Int32(n),
		SubnetId: awssdk.String(account.PrivateSubnets[0].ID),
	})
	if err != nil {
		t.Fatalf("launch %d instances: %v", n, err)
	}
	var ids []string
	for _, i := range out.Instances {
		ids = append(ids, awssdk.ToString(i.InstanceId))
	}
	t.Cleanup(func() {
		for _, id := range ids {
			moto.ClearInstanceHealth(id)
		}
	})
	return ids
}

// claimFor creates a NodeClaim holding the instance (with the termination finalizer, which no
// controller here removes, so a deleted NodeClaim stays, marked) and its Node.
func claimFor(t *testing.T, instanceID string) *karpv1.NodeClaim {
	t.Helper()
	ctx := context.Background()
	providerID := aws.ProviderID(account.PrivateSubnets[0].Zone, instanceID)
	nc := controllertest.NodeClaim(controllertest.Name("health"), "default")
	nc.Finalizers = []string{karpv1.TerminationFinalizer}
	nc.Labels[karpv1.CapacityTypeLabelKey] = karpv1.CapacityTypeOnDemand
	if err := env.Client.Create(ctx, nc); err != nil {
		t.Fatalf("create nodeclaim: %v", err)
	}
	nc.Status.ProviderID, nc.Status.NodeName = providerID, nc.Name
	if err := env.Client.Status().Update(ctx, nc); err != nil {
		t.Fatalf("set the provider ID of nodeclaim %s: %v", nc.Name, err)
	}
	if err := env.Client.Create(ctx, controllertest.KwokNode(nc.Name, providerID)); err != nil {
		t.Fatalf("create node: %v", err)
	}
	return nc
}

// deleting reports whether the NodeClaim is being deleted, and its termination timestamp.
func deleting(t *testing.T, nc *karpv1.NodeClaim) (bool, string) {
	t.Helper()
	got := nc.DeepCopy()
	if err := env.Get(context.Background(), got); err != nil {
		t.Fatalf("get nodeclaim %s: %v", nc.Name, err)
	}
	return got.DeletionTimestamp != nil, got.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]
}

// hasEvents waits for an InstanceUnhealthy Event containing text on the NodeClaim and its Node.
func hasEvents(t *testing.T, nc *karpv1.NodeClaim, text string) {
	t.Helper()
	controllertest.Eventually(t, 30*time.Second, "InstanceUnhealthy Events on the NodeClaim and its Node", func(ctx context.Context) error {
		return errors.Join(env.HasEvent(ctx, nc.Name, "InstanceUnhealthy", text), env.HasEvent(ctx, nc.Status.NodeName, "InstanceUnhealthy", text))
	})
}

func TestImpairedInstanceTerminatedAfterTolerance(t *testing.T) {
	tests := []struct {
		name   string
		health awstest.InstanceHealth
		reason string
		note   string
	}{
		{name: "instance status", health: awstest.InstanceHealth{InstanceStatus: "impaired"}, reason: "instance_status", note: "its instance status check impaired since " + t0.Format(time.RFC3339)},
		{name: "system status", health: awstest.InstanceHealth{SystemStatus: "impaired"}, reason: "system_status", note: "its system status check impaired since " + t0.Format(time.RFC3339)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids := launch(t, 2)
			sick, healthy := claimFor(t, ids[0]), claimFor(t, ids[1])
			moto.SetInstanceHealth(ids[0], tt.health)
			disrupted := map[string]string{"reason": tt.reason, "nodepool": "default", "capacity_type": karpv1.CapacityTypeOnDemand}

			// t0: the first poll finds it impaired; 60 s later it is still tolerated.
			p := startPoller(t, interruption.InstanceStatusOptions{})
			for _, at := range []string{"t0", "t0+60s"} {
				if at != "t0" {
					p.step(t, time.Minute)
				}
				if del, _ := deleting(t, sick); del {
					t.Fatalf("at %s the NodeClaim of an instance impaired for less than 120 s is deleted", at)
				}
			}
			if n := metricstest.Sum(t, p.reg, unhealthyTotal, map[string]string{"category": tt.reason}); n != 2 {
				t.Errorf("%s{category=%s} = %v after two polls, want 2", unhealthyTotal, tt.reason, n)
			}
			// t0+120s: impaired for the tolerance: forceful termination.
			p.step(t, time.Minute)
			del, stamp := deleting(t, sick)
			if want := t0.Add(2 * time.Minute).Format(time.RFC3339); !del || stamp != want {
				t.Fatalf("at t0+120s: deleting %v, termination timestamp %q; want deleted with the timestamp %s (now)", del, stamp, want)
			}
			hasEvents(t, sick, tt.note)
			if n := metricstest.Sum(t, p.reg, disruptedTotal, disrupted); n != 1 {
				t.Errorf("%s%v = %v, want 1", disruptedTotal, disrupted, n)
			}
			if del, _ := deleting(t, healthy); del {
				t.Error("the NodeClaim of the healthy instance was deleted")
			}
			// Another poll leaves the deleting NodeClaim alone.
			p.step(t, time.Minute)
			if n := metricstest.Sum(t, p.reg, disruptedTotal, disrupted); n != 1 {
				t.Errorf("%s%v = %v after another poll, want 1: a deleting NodeClaim must be left alone", disruptedTotal, disrupted, n)
			}
		})
	}
}

func TestScheduledRetirementDeletesGracefully(t *testing.T) {
	ids := launch(t, 1)
	nc := claimFor(t, ids[0])
	notBefore := t0.Add(72 * time.Hour)
	moto.SetInstanceHealth(ids[0], awstest.InstanceHealth{Events: []awstest.InstanceEvent{
		{Code: "instance-retirement", NotBefore: notBefore, NotAfter: notBefore.Add(2 * time.Hour), Description: "The instance is running on degraded hardware"},
	}})
	p := startPoller(t, interruption.InstanceStatusOptions{})
	del, stamp := deleting(t, nc)
	if !del || stamp != "" {
		t.Fatalf("deleting %v, termination timestamp %q; want a graceful deletion (no timestamp) at the first poll", del, stamp)
	}
	hasEvents(t, nc, "EC2 scheduled instance-retirement not before "+notBefore.Format(time.RFC3339)+" (The instance is running on degraded hardware)")
	if n := metricstest.Sum(t, p.reg, disruptedTotal, map[string]string{"reason": "event_status"}); n != 1 {
		t.Errorf("%s{reason=event_status} = %v, want 1", disruptedTotal, n)
	}
}

// TestPagesAndOtherClusters has more impaired instances than a page holds, some of another
// cluster (no NodeClaim here). EC2's impairedSince (10 minutes before the first poll) counts, so
// the first poll — as after a restart — terminates the cluster's at once and ignores the others.
func TestPagesAndOtherClusters(t *testing.T) {
	ids := launch(t, 11)
	var claims []*karpv1.NodeClaim
	for i, id := range ids {
		moto.SetInstanceHealth(id, awstest.InstanceHealth{SystemStatus: "impaired", ImpairedSince: t0.Add(-10 * time.Minute)})
		if i < 7 {
			claims = append(claims, claimFor(t, id))
		}
	}
	before := moto.Calls("ec2:DescribeInstanceStatus")
	p := startPoller(t, interruption.InstanceStatusOptions{PageSize: 5})
	for _, nc := range claims {
		if del, stamp := deleting(t, nc); !del || stamp != t0.Format(time.RFC3339) {
			t.Errorf("nodeclaim %s: deleting %v, termination timestamp %q; want deleted forcefully at t0", nc.Name, del, stamp)
		}
	}
	if n := metricstest.Sum(t, p.reg, disruptedTotal, map[string]string{"reason": "system_status"}); n != 7 {
		t.Errorf("%s{reason=system_status} = %v, want 7 (the other cluster's 4 are not ours)", disruptedTotal, n)
	}
	if n := metricstest.Sum(t, p.reg, unhealthyTotal, map[string]string{"category": "system_status"}); n != 7 {
		t.Errorf("%s{category=system_status} = %v, want 7", unhealthyTotal, n)
	}
	// The system-status query alone needs 3 pages of 5 for these 11; the two others at least one each.
	if calls := moto.Calls("ec2:DescribeInstanceStatus") - before; calls < 5 {
		t.Errorf("%d DescribeInstanceStatus calls, want at least 5 (11 impaired instances in pages of 5, plus two other queries)", calls)
	}
}

func TestAPIErrorRetriedAndCounted(t *testing.T) {
	ids := launch(t, 1)
	nc := claimFor(t, ids[0])
	moto.SetInstanceHealth(ids[0], awstest.InstanceHealth{Events: []awstest.InstanceEvent{{Code: "system-maintenance", NotBefore: t0.Add(24 * time.Hour)}}})
	// The SDK client tries 3 times: the whole first poll fails, throttled.
	moto.FailNext("ec2:DescribeInstanceStatus", 3, 503, "")
	p := startPoller(t, interruption.InstanceStatusOptions{RetryMin: 10 * time.Second})
	if n := metricstest.Sum(t, p.reg, errorsTotal, map[string]string{"error": "RequestLimitExceeded"}); n != 1 {
		t.Errorf("%s{error=RequestLimitExceeded} = %v, want 1", errorsTotal, n)
	}
	if del, _ := deleting(t, nc); del {
		t.Fatal("deleted without a successful poll")
	}
	// The retry comes after RetryMin, not the minute-long interval.
	p.step(t, 10*time.Second)
	if del, _ := deleting(t, nc); !del {
		t.Fatal("the retried poll did not act on the scheduled maintenance")
	}
	if n := metricstest.Sum(t, p.reg, errorsTotal, nil); n != 1 {
		t.Errorf("%s = %v after the retry, want still 1", errorsTotal, n)
	}
}

// TestPollerBesideQueueController sets up the poller and the queue controller in one manager, as
// the AWS provider does: both register the instance-ID index, once.
func TestPollerBesideQueueController(t *testing.T) {
	env.StartManager(t, func(mgr ctrl.Manager) error {
		ic, err := interruption.NewController(mgr.GetClient(), interruption.Options{Queue: account.QueueName, SQS: sqs.NewFromConfig(moto.Config),
			Offerings: aws.NewUnavailableOfferings(nil, 0), InstanceID: aws.ParseProviderID})
		if err != nil {
			return err
		}
		isp, err := interruption.NewInstanceStatusPoller(mgr.GetClient(), interruption.InstanceStatusOptions{EC2: ec2.NewFromConfig(moto.Config), InstanceID: aws.ParseProviderID})
		if err != nil {
			return err
		}
		if err := ic.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("queue controller: %w", err)
		}
		if err := isp.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("instance status poller beside the queue controller: %w", err)
		}
		return nil
	})
}
