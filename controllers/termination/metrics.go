package termination

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the termination controller's Prometheus metrics.
type Metrics struct {
	// PodsEvicted counts successful evictions.
	PodsEvicted prometheus.Counter
	// EvictionsBlocked counts evictions refused by a PodDisruptionBudget.
	EvictionsBlocked prometheus.Counter
	// PodsDeleted counts pods deleted because the termination grace period ran out.
	PodsDeleted prometheus.Counter
	// Terminated counts NodeClaims whose termination finished, by NodePool.
	Terminated *prometheus.CounterVec
	// Duration observes the time from a NodeClaim's deletion to the removal of its finalizer.
	Duration prometheus.Histogram
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "joiner", Subsystem: "termination", Name: name, Help: help})
	}
	m := &Metrics{
		PodsEvicted:      counter("pods_evicted_total", "Pods evicted while draining nodes."),
		EvictionsBlocked: counter("evictions_blocked_total", "Evictions refused because a PodDisruptionBudget allowed no disruption."),
		PodsDeleted:      counter("pods_deleted_total", "Pods deleted because the NodeClaim's terminationGracePeriod ran out."),
		Terminated: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "joiner", Subsystem: "termination", Name: "nodeclaims_terminated_total",
			Help: "NodeClaims whose node was drained and whose instance was terminated."}, []string{"nodepool"}),
		Duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "joiner", Subsystem: "termination", Name: "duration_seconds",
			Help: "Time from a NodeClaim's deletion to the end of its termination.", Buckets: prometheus.ExponentialBuckets(1, 2, 14)}),
	}
	var err error
	if m.PodsEvicted, err = register(reg, m.PodsEvicted); err != nil {
		return nil, err
	}
	if m.EvictionsBlocked, err = register(reg, m.EvictionsBlocked); err != nil {
		return nil, err
	}
	if m.PodsDeleted, err = register(reg, m.PodsDeleted); err != nil {
		return nil, err
	}
	if m.Terminated, err = register(reg, m.Terminated); err != nil {
		return nil, err
	}
	if m.Duration, err = register(reg, m.Duration); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c with reg, or returns the collector already registered under its name.
func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing, nil
			}
		}
		return c, fmt.Errorf("register termination metric: %w", err)
	}
	return c, nil
}
