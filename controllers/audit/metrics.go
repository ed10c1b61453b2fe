package audit

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/metrics"
)

// Metrics are the audit's Prometheus metrics. The audit is Joiner's own, so they carry the
// joiner_ prefix.
type Metrics struct {
	// Violations is joiner_audit_violations{policy, enforcement_action}: violations the last
	// audit found.
	Violations *prometheus.GaugeVec
	// Runs is joiner_audit_runs_total: audit runs completed.
	Runs prometheus.Counter
	// Duration is joiner_audit_duration_seconds: time taken by one audit run.
	Duration prometheus.Histogram
}

// NewMetrics creates the audit metrics and registers them with reg (nil skips registration).
// Metrics already registered with reg are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Violations: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Joiner, Subsystem: "audit", Name: "violations",
			Help: "Violations found by the last audit, per policy and enforcement action."}, []string{"policy", "enforcement_action"}),
		Runs: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Joiner, Subsystem: "audit", Name: "runs_total",
			Help: "Audit runs completed."}),
		Duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metrics.Joiner, Subsystem: "audit", Name: "duration_seconds",
			Help: "Time taken by one audit run.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)}),
	}
	r := metrics.NewRegistrar(reg)
	m.Violations = metrics.Add(r, m.Violations)
	m.Runs = metrics.Add(r, m.Runs)
	m.Duration = metrics.Add(r, m.Duration)
	return metrics.Done(r, m)
}
