package expiration

import (
	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/metrics"
)

// DisruptedExpired is the reason label of karpenter_nodeclaims_disrupted_total for a NodeClaim
// deleted because it expired (forcefully, or at the end of the grace period of graceful
// expiration).
const DisruptedExpired = "expired"

// Metrics are the expiration controller's Prometheus metrics.
type Metrics struct {
	// Disrupted is karpenter_nodeclaims_disrupted_total{reason, nodepool, capacity_type}, shared
	// with the lifecycle controller, garbage collection and disruption: expiration counts the
	// NodeClaims it deletes with reason "expired".
	Disrupted *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg (by another controller, for Disrupted) are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	disrupted, err := metrics.Register(reg, metrics.NewNodeClaimsDisrupted())
	if err != nil {
		return nil, err
	}
	return &Metrics{Disrupted: disrupted}, nil
}

// expired counts a NodeClaim that expiration just deleted.
func (m *Metrics) expired(nc *karpv1.NodeClaim) {
	m.Disrupted.WithLabelValues(DisruptedExpired, nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.CapacityTypeLabelKey]).Inc()
}
