package podmetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/metrics"
)

// Metrics are the pod metrics controller's Prometheus metrics, named as Karpenter names them.
type Metrics struct {
	// State is karpenter_pods_state{name, namespace, owner, node, nodepool, zone, arch,
	// capacity_type, instance_type, phase, ready}: 1 for every pod, labelled with its current
	// state and the labels of the Node it is bound to.
	State *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		State: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Karpenter, Subsystem: "pods", Name: "state",
			Help: "Pod state is the current state of pods. Labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity type, instance type, pod phase and readiness."},
			[]string{metrics.NameLabel, metrics.NamespaceLabel, metrics.OwnerLabel, metrics.NodeLabel, metrics.NodePoolLabel, metrics.ZoneLabel,
				metrics.ArchLabel, metrics.CapacityTypeLabel, metrics.InstanceTypeLabel, metrics.PhaseLabel, metrics.ReadyLabel}),
	}
	r := metrics.NewRegistrar(reg)
	m.State = metrics.Add(r, m.State)
	return metrics.Done(r, m)
}
