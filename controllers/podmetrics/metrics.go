package podmetrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/metrics"
)

// stateLabels are the labels of karpenter_pods_state, in the order stateValues returns them.
var stateLabels = []string{metrics.NameLabel, metrics.NamespaceLabel, metrics.OwnerLabel, metrics.NodeLabel, metrics.NodePoolLabel,
	metrics.ZoneLabel, metrics.ArchLabel, metrics.CapacityTypeLabel, metrics.InstanceTypeLabel, metrics.PhaseLabel, metrics.ReadyLabel}

// Metrics are the pod metrics controller's Prometheus metrics, named as Karpenter names them.
type Metrics struct {
	// State is karpenter_pods_state{name, namespace, owner, node, nodepool, zone, arch,
	// capacity_type, instance_type, phase, ready}: 1 for every pod, labelled with its current
	// state and the labels of the Node it is bound to. It is computed from the cache when it is
	// scraped, so the series of 10,000 pods cost no memory between scrapes.
	State *StateCollector
}

// StateCollector is karpenter_pods_state: on each scrape it lists the pods and Nodes of the
// controller that currently leads (none: no series).
type StateCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	from *Controller
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{State: &StateCollector{desc: prometheus.NewDesc(prometheus.BuildFQName(metrics.Karpenter, "pods", "state"),
		"Pod state is the current state of pods. Labeled by the pod name, namespace, owner, node, nodepool name, zone, architecture, capacity type, instance type, pod phase and readiness.",
		stateLabels, nil)}}
	r := metrics.NewRegistrar(reg)
	m.State = metrics.Add(r, m.State)
	return metrics.Done(r, m)
}

// Describe implements prometheus.Collector.
func (s *StateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

// ValueType is the type of the series: gauges.
func (s *StateCollector) ValueType() prometheus.ValueType { return prometheus.GaugeValue }

// Collect implements prometheus.Collector: one series of value 1 per pod.
func (s *StateCollector) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	from := s.from
	s.mu.Unlock()
	if from == nil {
		return
	}
	if err := from.collect(func(values []string) {
		ch <- prometheus.MustNewConstMetric(s.desc, prometheus.GaugeValue, 1, values...)
	}); err != nil {
		ch <- prometheus.NewInvalidMetric(s.desc, err)
	}
}

// publishFrom makes c the source of the series (nil: none), and returns the previous one.
func (s *StateCollector) publishFrom(c *Controller) *Controller {
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.from
	s.from = c
	return prev
}
