package webhooks

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

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
	if reg == nil {
		return m, nil
	}
	var err error
	if m.violations, err = register(reg, m.violations); err != nil {
		return nil, err
	}
	if m.errors, err = register(reg, m.errors); err != nil {
		return nil, err
	}
	return m, nil
}

func register(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if existing, ok := dup.ExistingCollector.(*prometheus.CounterVec); ok {
			return existing, nil
		}
	}
	return nil, fmt.Errorf("register webhook metrics: %w", err)
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
