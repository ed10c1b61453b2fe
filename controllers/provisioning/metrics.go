package provisioning

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the provisioner's Prometheus metrics.
type Metrics struct {
	SchedulingDuration prometheus.Histogram
	NodeClaimsCreated  *prometheus.CounterVec
	PodsUnschedulable  prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg (nil skips registration).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		SchedulingDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "joiner", Subsystem: "provisioner",
			Name: "scheduling_duration_seconds", Help: "Time to read the cluster and simulate scheduling for one batch.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		NodeClaimsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "joiner", Subsystem: "provisioner",
			Name: "nodeclaims_created_total", Help: "NodeClaims created by the provisioner, per NodePool."}, []string{"nodepool"}),
		PodsUnschedulable: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "joiner", Subsystem: "provisioner",
			Name: "pods_unschedulable", Help: "Pods the last batch could not place."}),
	}
	if reg != nil {
		reg.MustRegister(m.SchedulingDuration, m.NodeClaimsCreated, m.PodsUnschedulable)
	}
	return m
}
