package nodeclaim

import (
	"testing"

	"github.com/joiner-dev/joiner/testsupport/metricstest"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

func TestDisruptedMetric(t *testing.T) {
	cases := []struct {
		eventReason string
		want        string
	}{
		{ReasonLaunchTimeout, "launch_timeout"},
		{ReasonRegistrationTimeout, "registration_timeout"},
		{ReasonInsufficientCapacity, "insufficient_capacity"},
		{ReasonNodeClassNotReady, "nodeclass_not_ready"},
		{ReasonInstanceNotFound, "instance_not_found"},
	}
	for _, tc := range cases {
		t.Run(tc.eventReason, func(t *testing.T) {
			m, err := NewMetrics(nil)
			if err != nil {
				t.Fatal(err)
			}
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
				karpv1.NodePoolLabelKey: "pool", karpv1.CapacityTypeLabelKey: "spot",
			}}}
			m.disrupted(nc, disruptionReason(tc.eventReason))
			if got := metricstest.Value(t, m.Disrupted.WithLabelValues(tc.want, "pool", "spot")); got != 1 {
				t.Errorf("karpenter_nodeclaims_disrupted_total{reason=%q,nodepool=pool,capacity_type=spot} = %v, want 1", tc.want, got)
			}
		})
	}
}

func TestNodesCreatedMetricUsesTheNodeLabels(t *testing.T) {
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.nodeCreated(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		karpv1.NodePoolLabelKey: "pool", corev1.LabelTopologyZone: "zone-b",
	}}})
	if got := metricstest.Value(t, m.NodesCreated.WithLabelValues("pool", "zone-b")); got != 1 {
		t.Errorf("karpenter_nodes_created_total{nodepool=pool,zone=zone-b} = %v, want 1", got)
	}
}

// TestSharedMetricsRegisterTwice checks that a second lifecycle controller against one registry
// reuses the metrics instead of failing.
func TestSharedMetricsRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := NewMetrics(reg)
	if err != nil {
		t.Fatalf("second NewMetrics: %v", err)
	}
	if first.Disrupted != second.Disrupted || first.NodesCreated != second.NodesCreated {
		t.Error("the second NewMetrics did not reuse the registered metrics")
	}
}
