// Package metrics holds what every package that declares Prometheus metrics shares: the two
// namespaces (karpenter for the concepts Karpenter has, so its dashboards and alerts work
// unchanged, and joiner for Joiner's own), the label names Karpenter uses, and registration that
// tolerates a second registration of the same collector. Each package declares its own metrics
// in its metrics.go; this package declares none.
package metrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespaces.
const (
	// Karpenter is the namespace of metrics whose concept Karpenter has (karpenter_nodeclaims_*,
	// karpenter_nodepools_*, karpenter_pods_*, ...). Their names and labels follow Karpenter v1.14.
	Karpenter = "karpenter"
	// Joiner is the namespace of Joiner-only concepts: policy, audit, webhooks, certificates.
	Joiner = "joiner"
)

// Label names, as Karpenter spells them.
const (
	NodePoolLabel     = "nodepool"
	ReasonLabel       = "reason"
	ZoneLabel         = "zone"
	CapacityTypeLabel = "capacity_type"
	ResourceTypeLabel = "resource_type"
	ControllerLabel   = "controller"
	MethodLabel       = "method"
	ProviderLabel     = "provider"
	ErrorLabel        = "error"
	// MinValuesRelaxedLabel says whether a NodeClaim was created with its minValues relaxed.
	MinValuesRelaxedLabel = "min_values_relaxed"
	// CodeLabel is the HTTP status code of an API request.
	CodeLabel = "code"
	// Pod labels of karpenter_pods_state.
	NameLabel         = "name"
	NamespaceLabel    = "namespace"
	OwnerLabel        = "owner"
	NodeLabel         = "node"
	ArchLabel         = "arch"
	InstanceTypeLabel = "instance_type"
	PhaseLabel        = "phase"
	ReadyLabel        = "ready"
)

// Register registers c with reg and returns it, or returns the collector of the same name that an
// earlier call registered (so that building a component twice against one registry works). A
// nil reg registers nothing and returns c.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
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
		return c, fmt.Errorf("register metric: %w", err)
	}
	return c, nil
}

// NewNodeClaimsDisrupted returns karpenter_nodeclaims_disrupted_total{reason, nodepool,
// capacity_type}, which the lifecycle controller, garbage collection and disruption all count
// into; register it with Register, which hands every caller the one registered collector.
func NewNodeClaimsDisrupted() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Karpenter, Subsystem: "nodeclaims", Name: "disrupted_total",
		Help: "Number of nodeclaims disrupted in total by Karpenter. Labeled by reason the nodeclaim was disrupted, the owning nodepool and capacity type."},
		[]string{ReasonLabel, NodePoolLabel, CapacityTypeLabel})
}

// NewNodeClaimsCreated returns karpenter_nodeclaims_created_total{reason, nodepool,
// min_values_relaxed}, which the provisioner and disruption (for replacements) count into.
func NewNodeClaimsCreated() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Karpenter, Subsystem: "nodeclaims", Name: "created_total",
		Help: "Number of nodeclaims created in total by Karpenter. Labeled by reason the nodeclaim was created, the owning nodepool, and if min values was relaxed for this nodeclaim."},
		[]string{ReasonLabel, NodePoolLabel, MinValuesRelaxedLabel})
}

// Registrar registers a component's collectors one after another and keeps the first error, so
// that a metrics constructor reads as the list of its metrics. Use Add for each collector, then
// Err once.
type Registrar struct {
	reg prometheus.Registerer
	err error
}

// NewRegistrar returns a Registrar over reg; a nil reg registers nothing.
func NewRegistrar(reg prometheus.Registerer) *Registrar { return &Registrar{reg: reg} }

// Add registers c as Register does and returns the collector to use: c, or the one an earlier
// registration of the same metric left in the registry. After a failure it registers nothing more
// and returns c.
func Add[T prometheus.Collector](r *Registrar, c T) T {
	if r.err != nil {
		return c
	}
	got, err := Register(r.reg, c)
	r.err = err
	return got
}

// Err returns the first registration error, if any.
func (r *Registrar) Err() error { return r.err }

// Done returns v and no error when every registration of r succeeded, else the zero value (nil
// for a pointer) and the first error: the last line of a metrics constructor.
func Done[T any](r *Registrar, v T) (T, error) {
	if r.err != nil {
		var zero T
		return zero, r.err
	}
	return v, nil
}
