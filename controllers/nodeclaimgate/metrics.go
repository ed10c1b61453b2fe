package nodeclaimgate

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/metrics"
)

// Metrics are the gate's Prometheus metrics. Karpenter has no tenancy, so they are Joiner's.
type Metrics struct {
	// Refused is joiner_tenancy_refused_nodeclaims_total{controller, nodepool}: NodeClaims the
	// gate did not create because their NodePool is not bound to the namespace of a pod they
	// were for. controller is the creator (provisioner, disruption, nodepool.static).
	Refused *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg (by another controller's gate, or an earlier call) are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	r := metrics.NewRegistrar(reg)
	m := &Metrics{Refused: metrics.Add(r, prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Joiner, Subsystem: "tenancy",
		Name: "refused_nodeclaims_total",
		Help: "NodeClaims not created because their NodePool is not bound to the namespace of a pod they were for. Labeled by the controller that planned them and the NodePool."},
		[]string{metrics.ControllerLabel, metrics.NodePoolLabel}))}
	return metrics.Done(r, m)
}
