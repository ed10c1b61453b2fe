package cloudformation_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
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
	"github.com/joiner-dev/joiner/testsupport/metricstest"
)

// interruptionEvent is an event EC2 or AWS Health sends, and what the controller should make of
// it once the stack's rules routed it to the queue ("" when no rule routes it).
type interruptionEvent struct {
	name, source, detailType string
	detail                   func(instance string) map[string]any
	kind                     interruption.Kind
}

func ec2Detail(fields ...string) func(string) map[string]any {
	return func(instance string) map[string]any {
		d := map[string]any{"instance-id": instance}
		for i := 0; i+1 < len(fields); i += 2 {
			d[fields[i]] = fields[i+1]
		}
		return d
	}
}

func healthDetail(category string) func(string) map[string]any {
	return func(instance string) map[string]any {
		return map[string]any{"service": "EC2", "eventTypeCategory": category, "eventTypeCode": "AWS_EC2_PERSISTENT_INSTANCE_RETIREMENT_SCHEDULED",
			"affectedEntities": []map[string]any{{"entityValue": instance}}}
	}
}

var interruptionEvents = []interruptionEvent{
	{name: "spot", source: "aws.ec2", detailType: "EC2 Spot Instance Interruption Warning",
		detail: ec2Detail("instance-action", "terminate"), kind: interruption.KindSpotInterrupted},
	{name: "rebalance", source: "aws.ec2", detailType: "EC2 Instance Rebalance Recommendation",
		detail: ec2Detail(), kind: interruption.KindRebalanceRecommendation},
	{name: "stopping", source: "aws.ec2", detailType: "EC2 Instance State-change Notification",
		detail: ec2Detail("state", "stopping"), kind: interruption.KindInstanceStopped},
	{name: "terminated", source: "aws.ec2", detailType: "EC2 Instance State-change Notification",
		detail: ec2Detail("state", "terminated"), kind: interruption.KindInstanceTerminated},
	{name: "retirement", source: "aws.health", detailType: "AWS Health Event",
		detail: healthDetail("scheduledChange"), kind: interruption.KindScheduledChange},
	{name: "reservation", source: "aws.ec2", detailType: "EC2 Capacity Reservation Instance Interruption Warning",
		detail: ec2Detail(), kind: interruption.KindCapacityReservationInterrupted},
	// Events the rules keep out of the queue: the controller would only count them as no_op.
	{name: "running", source: "aws.ec2", detailType: "EC2 Instance State-change Notification", detail: ec2Detail("state", "running")},
	{name: "health issue", source: "aws.health", detailType: "AWS Health Event", detail: healthDetail("issue")},
	{name: "ami", source: "aws.ec2", detailType: "EC2 AMI State Change", detail: ec2Detail("State", "available")},
}

// checkInterruption puts each of interruptionEvents on the default event bus, about the instance
// of its own NodeClaim, and polls the queue with the AWS provider's interruption controller
// configured as `--interruption-queue=<the stack's InterruptionQueueName>`: every routed event is
// received once as its kind, the NodeClaims of the kinds that delete are deleted (the rebalanced
// one is kept), the queue ends empty, and nothing else arrives.
func checkInterruption(ctx context.Context, t *testing.T, m *awstest.Moto, eb *eventbridge.Client, queue string) {
	t.Helper()
	scheme, err := apischeme.New()
	if err != nil {
		t.Fatal(err)
	}
	builder := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&karpv1.NodeClaim{}).
		WithIndex(&karpv1.NodeClaim{}, interruption.InstanceIDField, interruption.IndexInstanceIDs(aws.ParseProviderID)).
		WithIndex(&corev1.Node{}, fieldindex.NodeProviderID, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} })
	claims := map[string]*karpv1.NodeClaim{}
	for i, e := range interruptionEvents {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i)),
			Finalizers: []string{karpv1.TerminationFinalizer},
			Labels: map[string]string{karpv1.NodePoolLabelKey: "default", karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeSpot,
				karpv1.LabelInstanceType: "m5.large", karpv1.LabelTopologyZone: "us-east-1a"}}}
		nc.Status.ProviderID = aws.ProviderID("us-east-1a", fmt.Sprintf("i-0%016x", 0xa11ce0+i))
		claims[e.name] = nc
		builder = builder.WithObjects(nc)
	}
	kube := builder.Build()
	c, err := interruption.NewController(kube, interruption.Options{
		Queue: queue, SQS: sqs.NewFromConfig(m.Config), Offerings: aws.NewUnavailableOfferings(nil, 0),
		InstanceID: aws.ParseProviderID, Recorder: events.NewFakeRecorder(100), WaitTime: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if err := c.RegisterMetrics(reg); err != nil {
		t.Fatal(err)
	}

	routed := 0
	for _, e := range interruptionEvents {
		id, _ := aws.ParseProviderID(claims[e.name].Status.ProviderID)
		if err := putEvent(ctx, eb, e.source, e.detailType, e.detail(id)); err != nil {
			t.Fatal(err)
		}
		if e.kind != "" {
			routed++
		}
	}
	deleted := func() float64 { return metricstest.Sum(t, reg, "karpenter_interruption_deleted_messages_total", nil) }
	waitCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = wait.PollUntilContextCancel(waitCtx, 10*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if err := c.Poll(ctx); err != nil {
			return false, err
		}
		return deleted() >= float64(routed) && queueLen(ctx, t, m, queue) == 0, nil
	})
	if err != nil {
		t.Fatalf("waiting for the controller to handle %d messages from queue %s (deleted %v): %v", routed, queue, deleted(), err)
	}
	for _, e := range interruptionEvents {
		got := &karpv1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(claims[e.name]), got); err != nil {
			t.Fatal(err)
		}
		if want := e.kind.DeletesNodeClaims(); (got.DeletionTimestamp != nil) != want {
			t.Errorf("%s event: NodeClaim deleted = %v, want %v", e.name, got.DeletionTimestamp != nil, want)
		}
		if e.kind == "" {
			continue
		}
		if n := metricstest.Sum(t, reg, "karpenter_interruption_received_messages_total", map[string]string{"message_type": string(e.kind)}); n < 1 {
			t.Errorf("%s event: no %s message received", e.name, e.kind)
		}
	}
	noOp := metricstest.Sum(t, reg, "karpenter_interruption_received_messages_total", map[string]string{"message_type": string(interruption.KindNoOp)})
	if n := metricstest.Sum(t, reg, "karpenter_interruption_received_messages_total", nil); n != float64(routed) || deleted() != float64(routed) || noOp != 0 {
		t.Errorf("received %v (no_op %v) and deleted %v messages, want the %d the rules route and no event they should keep out", n, noOp, deleted(), routed)
	}
}

// queueLen is how many messages the queue holds, visible or in flight.
func queueLen(ctx context.Context, t *testing.T, m *awstest.Moto, queue string) int {
	t.Helper()
	sqsc := sqs.NewFromConfig(m.Config)
	u, err := sqsc.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(queue)})
	if err != nil {
		t.Fatal(err)
	}
	out, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	visible, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	hidden, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	return visible + hidden
}
