package noderepair

import (
	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/metrics"
)

// DisruptedUnhealthy is the reason label of karpenter_nodeclaims_disrupted_total for a NodeClaim
// that node repair deleted.
const DisruptedUnhealthy = "unhealthy"

// Label names of karpenter_nodeclaims_unhealthy_disrupted_total beyond the shared ones.
const (
	// ConditionLabel is the repaired condition's type in snake_case ("ready").
	ConditionLabel = "condition"
	// ImageIDLabel is the NodeClaim's status.imageID.
	ImageIDLabel = "image_id"
)

// Metrics are node repair's Prometheus metrics.
type Metrics struct {
	// Disrupted is karpenter_nodeclaims_disrupted_total{reason, nodepool, capacity_type}, shared
	// with the other controllers that delete NodeClaims: repair counts with reason "unhealthy".
	Disrupted *prometheus.CounterVec
	// UnhealthyDisrupted is karpenter_nodeclaims_unhealthy_disrupted_total{condition, nodepool,
	// capacity_type, image_id}: the NodeClaims repair deleted, by the condition that made it.
	UnhealthyDisrupted *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. A metric
// already registered with reg (Disrupted, by another controller) is reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := metrics.NewRegistrar(reg)
	m := &Metrics{
		Disrupted: metrics.Add(r, metrics.NewNodeClaimsDisrupted()),
		UnhealthyDisrupted: metrics.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metrics.Karpenter, Subsystem: "nodeclaims", Name: "unhealthy_disrupted_total",
			Help: "Number of unhealthy nodeclaims that node repair deleted. Labeled by the node condition that made the node unhealthy, the owning nodepool, capacity type and image ID.",
		}, []string{ConditionLabel, metrics.NodePoolLabel, metrics.CapacityTypeLabel, ImageIDLabel})),
	}
	return metrics.Done(r, m)
}

// repaired counts a NodeClaim that repair just deleted because of the condition m names.
func (m *Metrics) repaired(nc *karpv1.NodeClaim, mt match) {
	pool, capacity := nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.CapacityTypeLabelKey]
	m.Disrupted.WithLabelValues(DisruptedUnhealthy, pool, capacity).Inc()
	m.UnhealthyDisrupted.WithLabelValues(snakeCase(string(mt.policy.ConditionType)), pool, capacity, nc.Status.ImageID).Inc()
}
