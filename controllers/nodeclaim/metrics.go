package nodeclaim

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/metrics"
)

// Values of the reason label of karpenter_nodeclaims_disrupted_total counted by the lifecycle
// controller.
const (
	// DisruptedLaunchTimeout: the NodeClaim did not launch within the launch TTL.
	DisruptedLaunchTimeout = "launch_timeout"
	// DisruptedRegistrationTimeout: the NodeClaim's Node did not register within the
	// registration TTL.
	DisruptedRegistrationTimeout = "registration_timeout"
	// DisruptedInsufficientCapacity: no offering the NodeClaim allows had capacity.
	DisruptedInsufficientCapacity = "insufficient_capacity"
	// DisruptedNodeClassNotReady: the NodeClaim's node class could not be used.
	DisruptedNodeClassNotReady = "nodeclass_not_ready"
	// DisruptedInstanceNotFound: the NodeClaim launched but had not registered, and its instance
	// was gone from the provider.
	DisruptedInstanceNotFound = "instance_not_found"
)

// Metrics are the lifecycle controller's Prometheus metrics, named as Karpenter names them where
// Karpenter has the concept.
type Metrics struct {
	// Disrupted is karpenter_nodeclaims_disrupted_total{reason, nodepool, capacity_type}:
	// NodeClaims the lifecycle controller deleted (liveness timeouts, launches that cannot
	// succeed). Garbage collection counts into the same metric.
	Disrupted *prometheus.CounterVec
	// NodesCreated is karpenter_nodes_created_total{nodepool, zone}: Nodes that registered
	// for a NodeClaim.
	NodesCreated *prometheus.CounterVec
	// Initialized is joiner_nodeclaims_initialized_total{nodepool}: NodeClaims whose Node became
	// initialized. Karpenter v1.14 has no such counter (it reports status conditions instead).
	Initialized *prometheus.CounterVec
	// Adopted is joiner_nodeclaims_adopted_total{nodepool}: NodeClaims Joiner found launched
	// already (by Karpenter, before Joiner took over) and adopted.
	Adopted *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg (by an earlier call, or by garbage collection for Disrupted) are
// reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Disrupted: metrics.NewNodeClaimsDisrupted(),
		NodesCreated: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Karpenter, Subsystem: "nodes", Name: "created_total",
			Help: "Number of nodes created in total by Karpenter. Labeled by owning nodepool and zone."},
			[]string{metrics.NodePoolLabel, metrics.ZoneLabel}),
		Initialized: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Joiner, Subsystem: "nodeclaims", Name: "initialized_total",
			Help: "NodeClaims whose Node became initialized."}, []string{metrics.NodePoolLabel}),
		Adopted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Joiner, Subsystem: "nodeclaims", Name: "adopted_total",
			Help: "NodeClaims found launched before Joiner managed them (by Karpenter) and adopted."}, []string{metrics.NodePoolLabel}),
	}
	r := metrics.NewRegistrar(reg)
	for _, c := range []**prometheus.CounterVec{&m.Disrupted, &m.NodesCreated, &m.Initialized, &m.Adopted} {
		*c = metrics.Add(r, *c)
	}
	return metrics.Done(r, m)
}

// disrupted counts the NodeClaim, which the lifecycle controller just deleted for reason.
func (m *Metrics) disrupted(nc *karpv1.NodeClaim, reason string) {
	m.Disrupted.WithLabelValues(reason, nodePoolOf(nc), nc.Labels[karpv1.CapacityTypeLabelKey]).Inc()
}

// nodeCreated counts the Node that just registered.
func (m *Metrics) nodeCreated(node *corev1.Node) {
	m.NodesCreated.WithLabelValues(node.Labels[karpv1.NodePoolLabelKey], node.Labels[corev1.LabelTopologyZone]).Inc()
}

// disruptionReason is the reason label of karpenter_nodeclaims_disrupted_total for the event
// reason with which the lifecycle controller deletes a NodeClaim.
func disruptionReason(eventReason string) string {
	switch eventReason {
	case ReasonLaunchTimeout:
		return DisruptedLaunchTimeout
	case ReasonRegistrationTimeout:
		return DisruptedRegistrationTimeout
	case ReasonInsufficientCapacity:
		return DisruptedInsufficientCapacity
	case ReasonNodeClassNotReady:
		return DisruptedNodeClassNotReady
	case ReasonInstanceNotFound:
		return DisruptedInstanceNotFound
	default:
		return eventReason
	}
}
