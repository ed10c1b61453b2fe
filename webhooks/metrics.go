package webhooks

import (
	"github.com/prometheus/client_golang/prometheus"

	jmetrics "github.com/joiner-dev/joiner/metrics"
	"github.com/joiner-dev/joiner/policy"
)

// Metric names exported by the admission handlers.
const (
	// MetricPolicyViolations counts policy violations found at admission, by policy, enforcement action
	// (Deny, Warn, DryRun) and kind of the reviewed object.
	MetricPolicyViolations = "joiner_webhook_policy_violations_total"
	// MetricPolicyErrors counts policies that could not be evaluated at admission, by policy, enforcement
	// action and kind. The policy label is empty when the whole evaluation failed.
	MetricPolicyErrors = "joiner_webhook_policy_evaluation_errors_total"
)

// metrics are the handlers' Prometheus collectors.
type metrics struct {
	violations *prometheus.CounterVec
	errors     *prometheus.CounterVec
}

// newMetrics creates the collectors and registers them with reg when it is not nil. A collector that is
// already registered (a second set of handlers in one process) is shared rather than reported as an error.
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		violations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPolicyViolations,
			Help: "Policy violations found by Joiner's admission webhooks, by policy, enforcement action and kind.",
		}, []string{"policy", "action", "kind"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricPolicyErrors,
			Help: "Policies Joiner's admission webhooks could not evaluate, by policy, enforcement action and kind.",
		}, []string{"policy", "action", "kind"}),
	}
	r := jmetrics.NewRegistrar(reg)
	m.violations = jmetrics.Add(r, m.violations)
	m.errors = jmetrics.Add(r, m.errors)
	return jmetrics.Done(r, m)
}

func (m *metrics) record(kind string, v policy.Violation) {
	if v.IsError() {
		m.errors.WithLabelValues(v.Policy, string(v.Action), kind).Inc()
		return
	}
	m.violations.WithLabelValues(v.Policy, string(v.Action), kind).Inc()
}

func (m *metrics) evaluationFailed(kind string) {
	m.errors.WithLabelValues("", "", kind).Inc()
}
