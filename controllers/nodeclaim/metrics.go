package nodeclaim

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the lifecycle controller's Prometheus metrics. Each counter is labelled with the
// NodeClaim's NodePool ("" when it has none).
type Metrics struct {
	// Launched counts NodeClaims whose instance was created.
	Launched *prometheus.CounterVec
	// LaunchFailures counts failed launches by reason (InsufficientCapacity, NodeClassNotReady,
	// or the provider's CreateError reason, LaunchFailed otherwise).
	LaunchFailures *prometheus.CounterVec
	// Registered counts NodeClaims whose Node registered.
	Registered *prometheus.CounterVec
	// Initialized counts NodeClaims whose Node became initialized.
	Initialized *prometheus.CounterVec
	// LivenessTimeouts counts NodeClaims deleted because they did not launch or register in time.
	LivenessTimeouts *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg (by an earlier call) are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "joiner", Subsystem: "nodeclaims", Name: name, Help: help}, labels)
	}
	m := &Metrics{
		Launched:         counter("launched_total", "NodeClaims whose instance the cloud provider created.", "nodepool"),
		LaunchFailures:   counter("launch_failures_total", "Failed NodeClaim launches, by reason.", "nodepool", "reason"),
		Registered:       counter("registered_total", "NodeClaims whose Node registered.", "nodepool"),
		Initialized:      counter("initialized_total", "NodeClaims whose Node became initialized.", "nodepool"),
		LivenessTimeouts: counter("liveness_timeouts_total", "NodeClaims deleted because they did not launch or register in time, by stage.", "nodepool", "stage"),
	}
	var err error
	for _, c := range []**prometheus.CounterVec{&m.Launched, &m.LaunchFailures, &m.Registered, &m.Initialized, &m.LivenessTimeouts} {
		if *c, err = registerCounter(reg, *c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// registerCounter registers c with reg, or returns the counter already registered under its name.
func registerCounter(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	if reg == nil {
		return c, nil
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, nil
			}
		}
		return nil, fmt.Errorf("register nodeclaim metric: %w", err)
	}
	return c, nil
}
