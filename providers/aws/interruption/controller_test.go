package interruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/eventstest"

	"github.com/joiner-dev/joiner/testsupport/metricstest"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
)

// fakeSQS is an in-memory queue: ReceiveMessage hands out every message not received yet and
// DeleteMessage removes one by receipt handle.
type fakeSQS struct {
	mu         sync.Mutex
	messages   []sqstypes.Message
	received   map[string]bool
	deleted    []string
	receiveErr error
	urlCalls   int
	receives   int
	sent       int
}

func (f *fakeSQS) send(body string, sent time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sent++
	n := f.sent
	f.messages = append(f.messages, sqstypes.Message{
		MessageId: aws.String(fmt.Sprintf("m-%d", n)), ReceiptHandle: aws.String(fmt.Sprintf("r-%d", n)), Body: aws.String(body),
		Attributes: map[string]string{"SentTimestamp": strconv.FormatInt(sent.UnixMilli(), 10)},
	})
}

func (f *fakeSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.urlCalls++
	if aws.ToString(in.QueueName) != "prod-interruption" {
		return nil, &sqstypes.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.us-east-1.amazonaws.com/123456789012/prod-interruption")}, nil
}

func (f *fakeSQS) ReceiveMessage(_ context.Context, in *sqs.ReceiveMessageInput, _ ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.receives++
	if f.receiveErr != nil {
		return nil, f.receiveErr
	}
	if f.received == nil {
		f.received = map[string]bool{}
	}
	out := &sqs.ReceiveMessageOutput{}
	for _, m := range f.messages {
		if !f.received[*m.ReceiptHandle] && len(out.Messages) < int(in.MaxNumberOfMessages) {
			f.received[*m.ReceiptHandle] = true
			out.Messages = append(out.Messages, m)
		}
	}
	return out, nil
}

func (f *fakeSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, aws.ToString(in.ReceiptHandle))
	f.messages = slices.DeleteFunc(f.messages, func(m sqstypes.Message) bool { return *m.ReceiptHandle == *in.ReceiptHandle })
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *fakeSQS) deletedHandles() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.deleted))
}

// marks records MarkUnavailable calls as "type/zone/capacity".
type marks struct {
	mu  sync.Mutex
	got []string
}

func (m *marks) MarkUnavailable(instanceType, zone, capacityType string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, instanceType+"/"+zone+"/"+capacityType)
}

// parseProviderID stands in for aws.ParseProviderID (this package cannot import its parent).
func parseProviderID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, "aws:///")
	if !ok {
		return "", errors.New("not aws")
	}
	return rest[strings.LastIndex(rest, "/")+1:], nil
}

func claim(name, instance, capacityType string) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Finalizers: []string{karpv1.TerminationFinalizer},
		Labels: map[string]string{karpv1.NodePoolLabelKey: "default", karpv1.CapacityTypeLabelKey: capacityType,
			karpv1.LabelInstanceType: "m5.large", karpv1.LabelTopologyZone: "us-east-1b"}}}
	nc.Status.ProviderID = "aws:///us-east-1b/" + instance
	nc.Status.NodeName = "node-" + name
	return nc
}

func node(name, instance string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1b/" + instance}}
}

type fixture struct {
	kube     client.Client
	queue    *fakeSQS
	marks    *marks
	recorder *events.FakeRecorder
	clock    *testingclock.FakeClock
	c        *Controller
	reg      *prometheus.Registry
}

func newFixture(t *testing.T, funcs *interceptor.Funcs, objs ...client.Object) *fixture {
	t.Helper()
	scheme, err := apischeme.New()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{queue: &fakeSQS{}, marks: &marks{}, recorder: events.NewFakeRecorder(100), clock: testingclock.NewFakeClock(time.Now()), reg: prometheus.NewRegistry()}
	b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&karpv1.NodeClaim{}).
		WithIndex(&karpv1.NodeClaim{}, InstanceIDField, IndexInstanceIDs(parseProviderID)).
		WithIndex(&corev1.Node{}, fieldindex.NodeProviderID, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} })
	if funcs != nil {
		b = b.WithInterceptorFuncs(*funcs)
	}
	f.kube = b.Build()
	f.c, err = NewController(f.kube, Options{Queue: "prod-interruption", SQS: f.queue, Offerings: f.marks, InstanceID: parseProviderID,
		Clock: f.clock, Recorder: f.recorder})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.c.RegisterMetrics(f.reg); err != nil {
		t.Fatal(err)
	}
	return f
}

// deleting reports whether the NodeClaim is being deleted (it keeps its finalizer here).
func (f *fixture) deleting(t *testing.T, name string) bool {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: name}, nc); err != nil {
		t.Fatal(err)
	}
	return nc.DeletionTimestamp != nil
}

func TestPollActsOnEachKind(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		capacity   string
		wantDelete bool
		wantMarks  []string
		wantReason string
		kind       Kind
	}{
		{name: "spot interruption deletes and marks the offering", capacity: karpv1.CapacityTypeSpot,
			body:       event("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0abc123def4567890","instance-action":"terminate"}`),
			wantDelete: true, wantMarks: []string{"m5.large/us-east-1b/spot"}, wantReason: "SpotInterrupted", kind: KindSpotInterrupted},
		{name: "rebalance recommendation only records an event", capacity: karpv1.CapacityTypeSpot,
			body:       event("aws.ec2", "EC2 Instance Rebalance Recommendation", `{"instance-id":"i-0abc123def4567890"}`),
			wantReason: "SpotRebalanceRecommendation", kind: KindRebalanceRecommendation},
		{name: "scheduled change deletes", capacity: karpv1.CapacityTypeOnDemand,
			body: event("aws.health", "AWS Health Event", `{"service":"EC2","eventTypeCode":"AWS_EC2_INSTANCE_REBOOT_MAINTENANCE_SCHEDULED",`+
				`"eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-0abc123def4567890"}]}`),
			wantDelete: true, wantReason: "ScheduledChange", kind: KindScheduledChange},
		{name: "stopping deletes", capacity: karpv1.CapacityTypeOnDemand,
			body:       event("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc123def4567890","state":"stopping"}`),
			wantDelete: true, wantReason: "InstanceStopping", kind: KindInstanceStopped},
		{name: "terminated deletes", capacity: karpv1.CapacityTypeSpot,
			body:       event("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc123def4567890","state":"terminated"}`),
			wantDelete: true, wantReason: "InstanceTerminating", kind: KindInstanceTerminated},
		{name: "capacity reservation interruption deletes", capacity: karpv1.CapacityTypeOnDemand,
			body:       event("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning", `{"instance-id":"i-0abc123def4567890"}`),
			wantDelete: true, wantReason: "CapacityReservationInterrupted", kind: KindCapacityReservationInterrupted},
		{name: "running state does nothing", capacity: karpv1.CapacityTypeSpot,
			body: event("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc123def4567890","state":"running"}`),
			kind: KindNoOp},
		{name: "unparseable message is deleted unacted on", capacity: karpv1.CapacityTypeSpot,
			body: "{not json", kind: KindNoOp},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil, claim("a", instanceID, tt.capacity), node("node-a", instanceID), claim("b", "i-0bbb", tt.capacity))
			f.queue.send(tt.body, f.clock.Now().Add(-3*time.Second))
			if err := f.c.Poll(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := f.deleting(t, "a"); got != tt.wantDelete {
				t.Errorf("nodeclaim a deleting = %v, want %v", got, tt.wantDelete)
			}
			if f.deleting(t, "b") {
				t.Error("nodeclaim b of another instance was deleted")
			}
			if !slices.Equal(f.marks.got, tt.wantMarks) {
				t.Errorf("marked %v, want %v", f.marks.got, tt.wantMarks)
			}
			evs := eventstest.Drain(f.recorder)
			if tt.wantReason == "" {
				if len(evs) != 0 {
					t.Errorf("events %q, want none", evs)
				}
			} else if len(evs) != 2 || !strings.Contains(evs[0], " "+tt.wantReason+" ") || !strings.Contains(evs[1], " "+tt.wantReason+" ") {
				t.Errorf("events %q, want a %s on the NodeClaim and its Node", evs, tt.wantReason)
			}
			if got := f.queue.deletedHandles(); !slices.Equal(got, []string{"r-1"}) {
				t.Errorf("deleted messages %v, want the one received", got)
			}
			if v := metricstest.Value(t, f.c.metrics.Received.WithLabelValues(string(tt.kind))); v != 1 {
				t.Errorf("received{%s} = %v, want 1", tt.kind, v)
			}
			if v := metricstest.Value(t, f.c.metrics.Deleted); v != 1 {
				t.Errorf("deleted = %v, want 1", v)
			}
			wantDisrupted := 0.0
			if tt.wantDelete {
				wantDisrupted = 1
			}
			if v := metricstest.Value(t, f.c.metrics.Disrupted.WithLabelValues(string(tt.kind), "default", tt.capacity)); v != wantDisrupted {
				t.Errorf("nodeclaims_disrupted_total{%s} = %v, want %v", tt.kind, v, wantDisrupted)
			}
			var h dto.Metric
			if err := f.c.metrics.QueueDuration.Write(&h); err != nil {
				t.Fatal(err)
			}
			if n, sum := h.GetHistogram().GetSampleCount(), h.GetHistogram().GetSampleSum(); n != 1 || sum < 2.9 || sum > 3.1 {
				t.Errorf("queue duration: %d samples summing to %vs, want one of 3s (sent 3s before the fake now)", n, sum)
			}
		})
	}
}

func TestPollBatchOfMessages(t *testing.T) {
	f := newFixture(t, nil, claim("a", instanceID, karpv1.CapacityTypeSpot), claim("b", "i-0bbb", karpv1.CapacityTypeSpot))
	// One message per instance, one about an instance of no NodeClaim, one already handled twice.
	f.queue.send(event("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0abc123def4567890"}`), f.clock.Now())
	f.queue.send(event("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0bbb","state":"shutting-down"}`), f.clock.Now())
	f.queue.send(event("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0ccc"}`), f.clock.Now())
	f.queue.send(event("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc123def4567890","state":"shutting-down"}`), f.clock.Now())
	if err := f.c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !f.deleting(t, "a") || !f.deleting(t, "b") {
		t.Error("both nodeclaims should be deleting")
	}
	if got := f.queue.deletedHandles(); len(got) != 4 {
		t.Errorf("deleted %v, want all four messages", got)
	}
	// Instance a got two messages; it is deleted, and counted, once.
	if v := metricstest.Value(t, f.c.metrics.Disrupted.WithLabelValues(string(KindSpotInterrupted), "default", "spot")) +
		metricstest.Value(t, f.c.metrics.Disrupted.WithLabelValues(string(KindInstanceTerminated), "default", "spot")); v != 2 {
		t.Errorf("disrupted %v, want 2 (a once, b once)", v)
	}
	if f.queue.urlCalls != 1 {
		t.Errorf("GetQueueUrl called %d times, want once", f.queue.urlCalls)
	}
	if err := f.c.Poll(context.Background()); err != nil || f.queue.urlCalls != 1 {
		t.Errorf("second poll: %v, %d GetQueueUrl calls", err, f.queue.urlCalls)
	}
}

// TestStaleCacheDoesNotDeleteTwice gets a second message about an instance while the cache still
// shows its NodeClaim undeleted: it is neither deleted nor counted again, until deletedTTL.
func TestStaleCacheDoesNotDeleteTwice(t *testing.T) {
	deletes := 0
	f := newFixture(t, &interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if err := c.List(ctx, list, opts...); err != nil {
				return err
			}
			if claims, ok := list.(*karpv1.NodeClaimList); ok {
				for i := range claims.Items {
					claims.Items[i].DeletionTimestamp = nil // the cache has not seen the deletion yet
				}
			}
			return nil
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			deletes++
			return c.Delete(ctx, obj, opts...)
		},
	}, claim("a", instanceID, karpv1.CapacityTypeSpot))
	warning := event("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0abc123def4567890"}`)
	terminated := event("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc123def4567890","state":"shutting-down"}`)
	f.queue.send(warning, f.clock.Now())
	if err := f.c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.queue.send(terminated, f.clock.Now())
	if err := f.c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	disrupted := func() float64 {
		return metricstest.Value(t, f.c.metrics.Disrupted.WithLabelValues(string(KindSpotInterrupted), "default", "spot")) +
			metricstest.Value(t, f.c.metrics.Disrupted.WithLabelValues(string(KindInstanceTerminated), "default", "spot"))
	}
	if deletes != 1 || disrupted() != 1 || len(f.queue.deletedHandles()) != 2 {
		t.Errorf("deletes %d, disrupted %v, messages deleted %v; want the NodeClaim deleted and counted once, both messages deleted",
			deletes, disrupted(), f.queue.deletedHandles())
	}
	f.clock.Step(deletedTTL)
	f.queue.send(terminated, f.clock.Now())
	if err := f.c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if deletes != 2 {
		t.Errorf("deletes %d after the TTL, want the NodeClaim the cache still shows deleted again", deletes)
	}
}

func TestPollKeepsAMessageItCouldNotActOn(t *testing.T) {
	fail := true
	f := newFixture(t, &interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		if fail {
			return errors.New("apiserver unavailable")
		}
		return c.Delete(ctx, obj, opts...)
	}}, claim("a", instanceID, karpv1.CapacityTypeSpot))
	f.queue.send(event("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0abc123def4567890"}`), f.clock.Now())
	if err := f.c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.queue.deletedHandles(); len(got) != 0 || f.deleting(t, "a") {
		t.Fatalf("deleted %v / nodeclaim deleting %v: a message whose NodeClaim could not be deleted must stay", got, f.deleting(t, "a"))
	}
	// SQS hands it out again after the visibility timeout.
	f.queue.received = nil
	fail = false
	if err := f.c.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := f.queue.deletedHandles(); len(got) != 1 || !f.deleting(t, "a") {
		t.Errorf("after the retry: deleted %v, nodeclaim deleting %v", got, f.deleting(t, "a"))
	}
}

func TestPollErrors(t *testing.T) {
	f := newFixture(t, nil)
	f.c.opts.Queue = "missing"
	if err := f.c.Poll(context.Background()); err == nil || !strings.Contains(err.Error(), `SQS queue "missing" does not exist`) {
		t.Errorf("Poll on a missing queue = %v", err)
	}
	f.c.opts.Queue = "prod-interruption"
	f.queue.receiveErr = errors.New("throttled")
	if err := f.c.Poll(context.Background()); err == nil || !strings.Contains(err.Error(), "receive messages from https://sqs") {
		t.Errorf("Poll with a failing receive = %v", err)
	}
}

// TestStartBacksOffAndStops runs the loop on a failing queue with a fake clock: it retries after
// RetryMin, doubles the wait up to RetryMax, and returns when its context ends.
func TestStartBacksOffAndStops(t *testing.T) {
	f := newFixture(t, nil)
	f.queue.receiveErr = errors.New("throttled")
	f.c.opts.RetryMin, f.c.opts.RetryMax = time.Second, 2*time.Second
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.c.Start(ctx) }()
	receives := func() int {
		f.queue.mu.Lock()
		defer f.queue.mu.Unlock()
		return f.queue.receives
	}
	// waitFor polls cond until it holds, failing the test after a deadline.
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			return cond(), nil
		})
		if err != nil {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
	// waits are the backoffs after each failed receive: 1s, 2s, then 2s (RetryMax).
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 2 * time.Second} {
		waitFor(fmt.Sprintf("failed receive %d to back off", i+1), func() bool { return receives() == i+1 && f.clock.HasWaiters() })
		f.clock.Step(wait - time.Millisecond)
		if !f.clock.HasWaiters() || receives() != i+1 {
			t.Fatalf("retry %d came before its %s backoff", i+1, wait)
		}
		f.clock.Step(time.Millisecond)
	}
	waitFor("the fourth receive", func() bool { return receives() == 4 })
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Start did not return after its context ended")
	}
	if !f.c.NeedLeaderElection() {
		t.Error("the interruption controller must run on the leader only")
	}
}

func TestRegisterMetricsTwiceSharesCollectors(t *testing.T) {
	f := newFixture(t, nil)
	other, err := NewController(f.kube, Options{Queue: "prod-interruption", SQS: f.queue, Offerings: f.marks, InstanceID: parseProviderID})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.RegisterMetrics(f.reg); err != nil {
		t.Fatal(err)
	}
	if other.metrics.Received != f.c.metrics.Received || other.metrics.Deleted != f.c.metrics.Deleted {
		t.Error("a second registration did not reuse the registered collectors")
	}
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, mf := range families {
		names = append(names, mf.GetName())
	}
	// Vector metrics without series are not gathered: only the plain ones appear so far.
	for _, want := range []string{"karpenter_interruption_deleted_messages_total", "karpenter_interruption_message_queue_duration_seconds"} {
		if !slices.Contains(names, want) {
			t.Errorf("gathered %v, want %s", names, want)
		}
	}
}

func TestNewControllerValidates(t *testing.T) {
	f := newFixture(t, nil)
	base := Options{Queue: "q", SQS: f.queue, Offerings: f.marks, InstanceID: parseProviderID}
	tests := []struct {
		name   string
		mutate func(*Options)
		want   string
	}{
		{"no queue", func(o *Options) { o.Queue = " " }, "the queue name is required (--interruption-queue)"},
		{"no SQS", func(o *Options) { o.SQS = nil }, "an SQS client is required"},
		{"no cache", func(o *Options) { o.Offerings = nil }, "unavailable-offerings cache is required"},
		{"no parser", func(o *Options) { o.InstanceID = nil }, "provider ID parser is required"},
		{"bad queue", func(o *Options) { o.Queue = "arn:aws:sns:us-east-1:1:q" }, "is not an SQS queue ARN"},
	}
	for _, tt := range tests {
		o := base
		tt.mutate(&o)
		if _, err := NewController(f.kube, o); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewController = %v, want %q", tt.name, err, tt.want)
		}
	}
	if _, err := NewController(nil, base); err == nil || !strings.Contains(err.Error(), "a Kubernetes client is required") {
		t.Errorf("NewController without a client = %v", err)
	}
}
