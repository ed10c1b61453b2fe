package nodepool

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/metrics"
)

// Metrics are the NodePool status controller's Prometheus metrics, named as Karpenter names them.
type Metrics struct {
	// Usage is karpenter_nodepools_usage{nodepool, resource_type}: what the NodePool's nodes
	// hold (status.resources).
	Usage *prometheus.GaugeVec
	// Limit is karpenter_nodepools_limit{nodepool, resource_type}: spec.limits.
	Limit *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	labels := []string{metrics.NodePoolLabel, metrics.ResourceTypeLabel}
	m := &Metrics{
		Usage: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Karpenter, Subsystem: "nodepools", Name: "usage",
			Help: "The amount of resources that have been provisioned for a nodepool. Labeled by nodepool name and resource type."}, labels),
		Limit: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Karpenter, Subsystem: "nodepools", Name: "limit",
			Help: "Limits specified on the nodepool that restrict the quantity of resources provisioned. Labeled by nodepool name and resource type."}, labels),
	}
	r := metrics.NewRegistrar(reg)
	m.Usage = metrics.Add(r, m.Usage)
	m.Limit = metrics.Add(r, m.Limit)
	return metrics.Done(r, m)
}

// observe publishes the NodePool's usage and limits, replacing what was published for it before
// (a limit that was removed disappears).
func (m *Metrics) observe(np *karpv1.NodePool) {
	m.forget(np.Name)
	set := func(g *prometheus.GaugeVec, l corev1.ResourceList) {
		for name, q := range l {
			g.WithLabelValues(np.Name, string(name)).Set(q.AsApproximateFloat64())
		}
	}
	set(m.Usage, np.Status.Resources)
	set(m.Limit, np.Spec.Limits)
}

// forget removes every series of the NodePool.
func (m *Metrics) forget(nodePool string) {
	m.Usage.DeletePartialMatch(prometheus.Labels{metrics.NodePoolLabel: nodePool})
	m.Limit.DeletePartialMatch(prometheus.Labels{metrics.NodePoolLabel: nodePool})
}
