package termination

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// TestDrainMetrics checks the pod metrics of one drain pass over one pod.
func TestDrainMetrics(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pdbRefusal := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	cases := []struct {
		name string
		// evictErr is what the eviction request returns (nil: it is granted).
		evictErr error
		// deadline has passed: the pod is deleted rather than evicted.
		deadlinePassed bool
		// disruption is the NodeClaim's DisruptionReason condition reason ("" for none).
		disruption   string
		wantDrained  map[string]float64
		wantRequests map[string]float64
	}{
		{name: "granted eviction", wantDrained: map[string]float64{"": 1}, wantRequests: map[string]float64{"200": 1}},
		{name: "granted eviction of a disrupted nodeclaim", disruption: "Drifted",
			wantDrained: map[string]float64{"Drifted": 1}, wantRequests: map[string]float64{"200": 1}},
		{name: "eviction refused by a budget", evictErr: pdbRefusal,
			wantDrained: map[string]float64{}, wantRequests: map[string]float64{"429": 1}},
		{name: "eviction failing without an answer", evictErr: errors.New("connection reset"),
			wantDrained: map[string]float64{}, wantRequests: map[string]float64{"": 1}},
		{name: "deleted at the deadline", deadlinePassed: true,
			wantDrained: map[string]float64{ForcefulTermination: 1}, wantRequests: map[string]float64{}},
		{name: "deleted at the deadline of a disrupted nodeclaim", deadlinePassed: true, disruption: "Underutilized",
			wantDrained: map[string]float64{"Underutilized": 1}, wantRequests: map[string]float64{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(podOnNode("app", nil)).
				WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
				WithInterceptorFuncs(interceptor.Funcs{SubResourceCreate: func(ctx context.Context, c client.Client, sub string, obj, subObj client.Object, opts ...client.SubResourceCreateOption) error {
					if tc.evictErr != nil {
						return tc.evictErr
					}
					return c.SubResource(sub).Create(ctx, obj, subObj, opts...)
				}}).
				Build()
			m, err := NewMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			d := NewDrainer(c, c, clocktesting.NewFakeClock(now), events.NewFakeRecorder(100), m)
			nc := &karpv1.NodeClaim{}
			if tc.disruption != "" {
				nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeDisruptionReason, Status: metav1.ConditionTrue, Reason: tc.disruption}}
			}
			var deadline *time.Time
			if tc.deadlinePassed {
				deadline = ptr.To(now.Add(-time.Minute))
			}
			if _, err := d.Drain(withDrainReason(t.Context(), nc), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, deadline); err != nil && tc.evictErr == nil {
				t.Fatal(err)
			}
			assertCounters(t, m.PodsDrained, "reason", tc.wantDrained)
			assertCounters(t, m.EvictionRequests, "code", tc.wantRequests)
		})
	}
}

// TestStatusWrittenCountsTheFirstDrain checks that karpenter_nodes_drained_total counts the write
// that turns Drained True, once, and only for NodeClaims with a Node.
func TestStatusWrittenCountsTheFirstDrain(t *testing.T) {
	drained := func(status metav1.ConditionStatus, nodeName string) *karpv1.NodeClaim {
		nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{karpv1.NodePoolLabelKey: "pool"}}}
		nc.Status.NodeName = nodeName
		if status != "" {
			nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeDrained, Status: status, Reason: "x"}}
		}
		return nc
	}
	cases := []struct {
		name          string
		before, after *karpv1.NodeClaim
		want          float64
	}{
		{name: "no condition to true", before: drained("", "node"), after: drained(metav1.ConditionTrue, "node"), want: 1},
		{name: "false to true", before: drained(metav1.ConditionFalse, "node"), after: drained(metav1.ConditionTrue, "node"), want: 1},
		{name: "true stays true", before: drained(metav1.ConditionTrue, "node"), after: drained(metav1.ConditionTrue, "node"), want: 0},
		{name: "still draining", before: drained("", "node"), after: drained(metav1.ConditionFalse, "node"), want: 0},
		{name: "a nodeclaim without node drains nothing", before: drained("", ""), after: drained(metav1.ConditionTrue, ""), want: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMetrics(nil)
			if err != nil {
				t.Fatal(err)
			}
			m.statusWritten(tc.before, tc.after)
			if got := write(t, m.NodesDrained.WithLabelValues("pool")).GetCounter().GetValue(); got != tc.want {
				t.Errorf("drained %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTerminatedMetrics checks the labels and durations of terminated NodeClaims and Nodes.
func TestTerminatedMetrics(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	labels := map[string]string{karpv1.NodePoolLabelKey: "pool", karpv1.CapacityTypeLabelKey: "spot", corev1.LabelTopologyZone: "zone-a"}
	cases := []struct {
		name         string
		deleted      *metav1.Time
		wantDuration float64
	}{
		{name: "deleted a minute ago", deleted: &metav1.Time{Time: now.Add(-time.Minute)}, wantDuration: 60},
		{name: "never marked deleted", deleted: nil, wantDuration: 0},
		{name: "deletion in the future (clock skew)", deleted: &metav1.Time{Time: now.Add(time.Minute)}, wantDuration: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := NewMetrics(nil)
			if err != nil {
				t.Fatal(err)
			}
			meta := metav1.ObjectMeta{Labels: labels, DeletionTimestamp: tc.deleted}
			m.nodeClaimTerminated(&karpv1.NodeClaim{ObjectMeta: meta}, now)
			m.nodeTerminated(&corev1.Node{ObjectMeta: meta}, now)
			if got := write(t, m.NodeClaimsTerminated.WithLabelValues("pool", "spot", "zone-a")).GetCounter().GetValue(); got != 1 {
				t.Errorf("nodeclaims terminated %v, want 1", got)
			}
			if got := write(t, m.NodesTerminated.WithLabelValues("pool", "zone-a")).GetCounter().GetValue(); got != 1 {
				t.Errorf("nodes terminated %v, want 1", got)
			}
			h := write(t, m.NodeClaimTerminationDuration.WithLabelValues("pool")).GetHistogram()
			if h.GetSampleCount() != 1 || h.GetSampleSum() != tc.wantDuration {
				t.Errorf("nodeclaim termination duration: %d samples summing %v, want 1 of %v", h.GetSampleCount(), h.GetSampleSum(), tc.wantDuration)
			}
			s := write(t, m.NodeTerminationDuration.WithLabelValues("pool")).GetSummary()
			if s.GetSampleCount() != 1 || s.GetSampleSum() != tc.wantDuration {
				t.Errorf("node termination duration: %d samples summing %v, want 1 of %v", s.GetSampleCount(), s.GetSampleSum(), tc.wantDuration)
			}
		})
	}
}

// assertCounters compares every series of vec (one label, called label) with want.
func assertCounters(t *testing.T, vec *prometheus.CounterVec, label string, want map[string]float64) {
	t.Helper()
	got := map[string]float64{}
	ch := make(chan prometheus.Metric, 16)
	vec.Collect(ch)
	close(ch)
	for metric := range ch {
		var out dto.Metric
		if err := metric.Write(&out); err != nil {
			t.Fatal(err)
		}
		for _, l := range out.GetLabel() {
			if l.GetName() == label {
				got[l.GetValue()] = out.GetCounter().GetValue()
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s series %v, want %v", label, got, want)
		return
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s series %v, want %v", label, got, want)
			return
		}
	}
}

// write returns what the metric (a Counter, or an Observer that is a Metric) holds.
func write(t *testing.T, o any) *dto.Metric {
	t.Helper()
	metric, ok := o.(prometheus.Metric)
	if !ok {
		t.Fatalf("%T is not a metric", o)
	}
	var out dto.Metric
	if err := metric.Write(&out); err != nil {
		t.Fatal(err)
	}
	return &out
}
