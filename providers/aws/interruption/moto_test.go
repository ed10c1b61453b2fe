package interruption_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/eventstest"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
	"github.com/joiner-dev/joiner/providers/aws"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/providers/aws/interruption"
)

// TestMotoInterruptionQueue sends what EventBridge sends to the seeded queue of a moto account —
// a spot interruption warning, a rebalance recommendation and a message that is no event — and
// checks that the controller, long-polling the queue, deletes the interrupted NodeClaim, marks its
// spot offering unavailable in the provider's cache, leaves the rebalanced one alone, and deletes
// all three messages.
func TestMotoInterruptionQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("moto integration test skipped with -short")
	}
	ctx := context.Background()
	m := moto // shared with the instance-status tests (main_test.go); Seed gives this test its own queue
	env := m.Seed(ctx, t)
	sqsc := sqs.NewFromConfig(m.Config)

	scheme, err := apischeme.New()
	if err != nil {
		t.Fatal(err)
	}
	spot := nodeClaim("spot", "i-0a1b2c3d4e5f60718", "c5.large", "us-east-1b")
	rebalanced := nodeClaim("rebalanced", "i-0f1e2d3c4b5a69788", "m5.large", "us-east-1a")
	kube := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&karpv1.NodeClaim{}).
		WithObjects(spot, rebalanced).
		WithIndex(&karpv1.NodeClaim{}, interruption.InstanceIDField, interruption.IndexInstanceIDs(aws.ParseProviderID)).
		WithIndex(&corev1.Node{}, fieldindex.NodeProviderID, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
		Build()
	unavailable := aws.NewUnavailableOfferings(nil, 0)
	recorder := events.NewFakeRecorder(10)
	c, err := interruption.NewController(kube, interruption.Options{
		Queue: env.QueueName, SQS: sqsc, Offerings: unavailable, InstanceID: aws.ParseProviderID, Recorder: recorder,
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := c.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(runCtx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the controller did not stop")
		}
	}()

	for _, body := range []string{
		eventBridge("EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0a1b2c3d4e5f60718","instance-action":"terminate"}`),
		eventBridge("EC2 Instance Rebalance Recommendation", `{"instance-id":"i-0f1e2d3c4b5a69788"}`),
		"this is not an event",
	} {
		if _, err := sqsc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: awssdk.String(env.QueueURL), MessageBody: awssdk.String(body)}); err != nil {
			t.Fatalf("send to %s: %v", env.QueueName, err)
		}
	}

	waitCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	var left int
	err = wait.PollUntilContextCancel(waitCtx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(spot), got); err != nil || got.DeletionTimestamp == nil {
			return false, nil
		}
		attrs, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: awssdk.String(env.QueueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			return false, nil
		}
		visible, _ := strconv.Atoi(attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
		hidden, _ := strconv.Atoi(attrs.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		left = visible + hidden
		return left == 0 && gathered(t, reg, "karpenter_interruption_deleted_messages_total") == 3, nil
	})
	if err != nil {
		t.Fatalf("waiting for the interrupted NodeClaim to be deleted and the queue emptied (%d messages left, %v deleted): %v",
			left, gathered(t, reg, "karpenter_interruption_deleted_messages_total"), err)
	}
	if !unavailable.IsUnavailable("c5.large", "us-east-1b", karpv1.CapacityTypeSpot) {
		t.Error("the interrupted spot offering c5.large in us-east-1b is not marked unavailable")
	}
	if unavailable.IsUnavailable("c5.large", "us-east-1b", karpv1.CapacityTypeOnDemand) || unavailable.IsUnavailable("m5.large", "us-east-1a", karpv1.CapacityTypeSpot) {
		t.Error("offerings that were not interrupted are marked unavailable")
	}
	got := &karpv1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(rebalanced), got); err != nil || got.DeletionTimestamp != nil {
		t.Errorf("the rebalanced NodeClaim was deleted (%v): a rebalance recommendation only records an Event", err)
	}
	for kind, want := range map[interruption.Kind]float64{interruption.KindSpotInterrupted: 1, interruption.KindRebalanceRecommendation: 1, interruption.KindNoOp: 1} {
		if v := gathered(t, reg, "karpenter_interruption_received_messages_total", string(kind)); v != want {
			t.Errorf("received_messages_total{message_type=%s} = %v, want %v", kind, v, want)
		}
	}
	if n := gathered(t, reg, "karpenter_interruption_message_queue_duration_seconds"); n != 3 {
		t.Errorf("queue duration observed %v messages, want 3", n)
	}
	var reasons []string
	for _, e := range eventstest.Drain(recorder) {
		reasons = append(reasons, strings.Fields(e)[1])
	}
	if strings.Join(reasons, ",") != "SpotInterrupted,SpotRebalanceRecommendation" && strings.Join(reasons, ",") != "SpotRebalanceRecommendation,SpotInterrupted" {
		t.Errorf("events %v, want one SpotInterrupted and one SpotRebalanceRecommendation", reasons)
	}
}

func nodeClaim(name, instance, instanceType, zone string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Finalizers: []string{karpv1.TerminationFinalizer},
		Labels: map[string]string{karpv1.NodePoolLabelKey: "default", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeSpot,
			karpv1.LabelInstanceType: instanceType, karpv1.LabelTopologyZone: zone}}}
	nc.Status.ProviderID = aws.ProviderID(zone, instance)
	return nc
}

// eventBridge returns an aws.ec2 event as EventBridge delivers it to the queue.
func eventBridge(detailType, detail string) string {
	return fmt.Sprintf(`{"version":"0","id":"%d","detail-type":%q,"source":"aws.ec2","account":"%s","time":%q,"region":%q,"resources":[],"detail":%s}`,
		time.Now().UnixNano(), detailType, awstest.AccountID, time.Now().UTC().Format(time.RFC3339), awstest.Region, detail)
}

// gathered returns the value of a counter (the sample count of a histogram) in reg, for the
// series whose label values are labels; 0 when absent.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var values []string
			for _, l := range m.GetLabel() {
				values = append(values, l.GetValue())
			}
			if strings.Join(values, ",") != strings.Join(labels, ",") {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
