package drift

import (
	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/metrics"
)

// TypeLabel is the label of karpenter_nodeclaims_drifted_total that holds the drift reason, as
// Karpenter names it.
const TypeLabel = "type"

// Metrics are the drift controller's Prometheus metrics. Karpenter v1.14 has no drift counter
// (its v0.3x karpenter_nodeclaims_drifted{type, nodepool} went with v1, replaced by status
// condition metrics); this one keeps that name's labels in the karpenter namespace.
type Metrics struct {
	// Drifted is karpenter_nodeclaims_drifted_total{type, nodepool}: NodeClaims that became
	// drifted, by drift reason (NodePoolDrifted, RequirementsDrifted or the provider's reason).
	Drifted *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg by an earlier call are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Drifted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Karpenter, Subsystem: "nodeclaims", Name: "drifted_total",
			Help: "NodeClaims that became drifted. Labeled by drift reason (type) and owning nodepool."},
			[]string{TypeLabel, metrics.NodePoolLabel}),
	}
	r := metrics.NewRegistrar(reg)
	m.Drifted = metrics.Add(r, m.Drifted)
	return metrics.Done(r, m)
}

// drifted counts the NodeClaim, which just became drifted for reason.
func (m *Metrics) drifted(nc *karpv1.NodeClaim, reason cloudprovider.DriftReason) {
	m.Drifted.WithLabelValues(string(reason), nc.Labels[karpv1.NodePoolLabelKey]).Inc()
}
