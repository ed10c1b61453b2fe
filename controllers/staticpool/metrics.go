package staticpool

import (
	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/metrics"
)

// CreatedStatic is the reason label of karpenter_nodeclaims_created_total for a NodeClaim created
// to bring a static NodePool up to spec.replicas.
const CreatedStatic = "static"

// DisruptedStaticScaleDown is the reason label of karpenter_nodeclaims_disrupted_total for a
// NodeClaim deleted because its static NodePool has more NodeClaims than spec.replicas. Karpenter
// v1.14 does not count these deletions at all; the value is Joiner's.
const DisruptedStaticScaleDown = "static_scale_down"

// Metrics are the static NodePool controller's Prometheus metrics. Both are shared counters:
// other controllers count into them with other reasons.
type Metrics struct {
	// NodeClaimsCreated is karpenter_nodeclaims_created_total{reason, nodepool,
	// min_values_relaxed}, counted with reason "static" and min_values_relaxed "false".
	NodeClaimsCreated *prometheus.CounterVec
	// NodeClaimsDisrupted is karpenter_nodeclaims_disrupted_total{reason, nodepool,
	// capacity_type}, counted with reason "static_scale_down".
	NodeClaimsDisrupted *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg (by another controller, or an earlier call) are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{NodeClaimsCreated: metrics.NewNodeClaimsCreated(), NodeClaimsDisrupted: metrics.NewNodeClaimsDisrupted()}
	r := metrics.NewRegistrar(reg)
	m.NodeClaimsCreated = metrics.Add(r, m.NodeClaimsCreated)
	m.NodeClaimsDisrupted = metrics.Add(r, m.NodeClaimsDisrupted)
	return metrics.Done(r, m)
}

func (m *Metrics) created(pool string) {
	m.NodeClaimsCreated.WithLabelValues(CreatedStatic, pool, "false").Inc()
}

func (m *Metrics) deleted(nc *karpv1.NodeClaim) {
	m.NodeClaimsDisrupted.WithLabelValues(DisruptedStaticScaleDown, nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.CapacityTypeLabelKey]).Inc()
}
