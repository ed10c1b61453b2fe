package termination

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/metrics"
)

// ForcefulTermination is the reason label of karpenter_pods_drained_total for a pod deleted
// because the NodeClaim's terminationGracePeriod ran out (when its NodeClaim names no disruption
// reason).
const ForcefulTermination = "Forceful Termination"

// Metrics are the termination controller's Prometheus metrics, named as Karpenter names them.
type Metrics struct {
	// NodeClaimsTerminated is karpenter_nodeclaims_terminated_total{nodepool, capacity_type,
	// zone}: NodeClaims whose termination finalizer was released.
	NodeClaimsTerminated *prometheus.CounterVec
	// NodeClaimTerminationDuration is karpenter_nodeclaims_termination_duration_seconds{nodepool}:
	// time from a NodeClaim's deletion to the release of its finalizer.
	NodeClaimTerminationDuration *prometheus.HistogramVec
	// NodesTerminated is karpenter_nodes_terminated_total{nodepool, zone}: Nodes whose
	// termination finalizer was released.
	NodesTerminated *prometheus.CounterVec
	// NodeTerminationDuration is karpenter_nodes_termination_duration_seconds{nodepool}: time
	// from a Node's deletion to the release of its finalizer.
	NodeTerminationDuration *prometheus.SummaryVec
	// NodesDrained is karpenter_nodes_drained_total{nodepool}: NodeClaims with a Node whose
	// Drained condition became True.
	NodesDrained *prometheus.CounterVec
	// PodsDrained is karpenter_pods_drained_total{reason}: pods the drain evicted or deleted. The
	// reason is the NodeClaim's DisruptionReason condition reason when it has one; otherwise
	// ForcefulTermination for pods deleted at the terminationGracePeriod deadline, and "" for
	// evictions (Joiner records no other reason for a NodeClaim's deletion).
	PodsDrained *prometheus.CounterVec
	// EvictionRequests is karpenter_pods_eviction_requests_total{code}: eviction requests by
	// the HTTP status code of the answer ("200" granted, "429" refused by a PodDisruptionBudget,
	// "" when there was no answer).
	EvictionRequests *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		NodeClaimsTerminated: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Karpenter, Subsystem: "nodeclaims", Name: "terminated_total",
			Help: "Number of nodeclaims terminated in total by Karpenter. Labeled by the owning nodepool, capacity type, and zone."},
			[]string{metrics.NodePoolLabel, metrics.CapacityTypeLabel, metrics.ZoneLabel}),
		NodeClaimTerminationDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Karpenter, Subsystem: "nodeclaims", Name: "termination_duration_seconds",
			Help: "Duration of NodeClaim termination in seconds.", Buckets: prometheus.ExponentialBuckets(1, 2, 14)},
			[]string{metrics.NodePoolLabel}),
		NodesTerminated: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Karpenter, Subsystem: "nodes", Name: "terminated_total",
			Help: "Number of nodes terminated in total by Karpenter. Labeled by owning nodepool and zone."},
			[]string{metrics.NodePoolLabel, metrics.ZoneLabel}),
		NodeTerminationDuration: prometheus.NewSummaryVec(prometheus.SummaryOpts{Namespace: metrics.Karpenter, Subsystem: "nodes", Name: "termination_duration_seconds",
			Help:       "The time taken between a node's deletion request and the removal of its finalizer. Labeled by owning nodepool.",
			Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}},
			[]string{metrics.NodePoolLabel}),
		NodesDrained: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Karpenter, Subsystem: "nodes", Name: "drained_total",
			Help: "The total number of nodes drained by Karpenter. Labeled by owning nodepool."},
			[]string{metrics.NodePoolLabel}),
		PodsDrained: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Karpenter, Subsystem: "pods", Name: "drained_total",
			Help: "Number of pods drained during termination. Labeled by the reason of the node's disruption."},
			[]string{metrics.ReasonLabel}),
		EvictionRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Karpenter, Subsystem: "pods", Name: "eviction_requests_total",
			Help: "The number of eviction requests by the HTTP status code of their response."},
			[]string{metrics.CodeLabel}),
	}
	r := metrics.NewRegistrar(reg)
	for _, c := range []**prometheus.CounterVec{&m.NodeClaimsTerminated, &m.NodesTerminated, &m.NodesDrained, &m.PodsDrained, &m.EvictionRequests} {
		*c = metrics.Add(r, *c)
	}
	m.NodeClaimTerminationDuration = metrics.Add(r, m.NodeClaimTerminationDuration)
	m.NodeTerminationDuration = metrics.Add(r, m.NodeTerminationDuration)
	return metrics.Done(r, m)
}

// nodeClaimTerminated counts the NodeClaim whose finalizer was released at now.
func (m *Metrics) nodeClaimTerminated(nc *karpv1.NodeClaim, now time.Time) {
	nodePool := nc.Labels[karpv1.NodePoolLabelKey]
	m.NodeClaimsTerminated.WithLabelValues(nodePool, nc.Labels[karpv1.CapacityTypeLabelKey], nc.Labels[corev1.LabelTopologyZone]).Inc()
	m.NodeClaimTerminationDuration.WithLabelValues(nodePool).Observe(sinceDeletion(nc.DeletionTimestamp, now))
}

// nodeTerminated counts the Node whose finalizer was released at now. A Node that termination
// deleted itself (its copy has no deletion timestamp) took no time.
func (m *Metrics) nodeTerminated(node *corev1.Node, now time.Time) {
	nodePool := node.Labels[karpv1.NodePoolLabelKey]
	m.NodesTerminated.WithLabelValues(nodePool, node.Labels[corev1.LabelTopologyZone]).Inc()
	m.NodeTerminationDuration.WithLabelValues(nodePool).Observe(sinceDeletion(node.DeletionTimestamp, now))
}

// statusWritten counts what a status write of a NodeClaim (before: as it was stored, after: as
// written) did: the first Drained=True of a NodeClaim that has a Node.
func (m *Metrics) statusWritten(before, after *karpv1.NodeClaim) {
	if after.Status.NodeName != "" && !conditionTrue(before, karpv1.ConditionTypeDrained) && conditionTrue(after, karpv1.ConditionTypeDrained) {
		m.NodesDrained.WithLabelValues(after.Labels[karpv1.NodePoolLabelKey]).Inc()
	}
}

// evictionRequested counts an eviction request by the status code of its answer.
func (m *Metrics) evictionRequested(err error) {
	code := "200"
	if err != nil {
		code = ""
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			code = strconv.Itoa(int(status.Status().Code))
		}
	}
	m.EvictionRequests.WithLabelValues(code).Inc()
}

// podDrained counts a pod the drain evicted (forced=false) or deleted at the deadline
// (forced=true), for the disruption reason the context carries (see withDrainReason).
func (m *Metrics) podDrained(ctx context.Context, forced bool) {
	reason, _ := ctx.Value(drainReasonKey{}).(string)
	if reason == "" && forced {
		reason = ForcefulTermination
	}
	m.PodsDrained.WithLabelValues(reason).Inc()
}

// drainReasonKey is the context key of the reason label of the pods a drain evicts.
type drainReasonKey struct{}

// withDrainReason returns ctx carrying the NodeClaim's disruption reason (its DisruptionReason
// condition's reason, "" without one) for the drain's pod metrics.
func withDrainReason(ctx context.Context, nc *karpv1.NodeClaim) context.Context {
	reason := ""
	if c := nc.StatusCondition(karpv1.ConditionTypeDisruptionReason); c != nil {
		reason = c.Reason
	}
	return context.WithValue(ctx, drainReasonKey{}, reason)
}

func conditionTrue(nc *karpv1.NodeClaim, conditionType string) bool {
	c := nc.StatusCondition(conditionType)
	return c != nil && c.Status == metav1.ConditionTrue
}

// sinceDeletion is the number of seconds from deleted (nil or zero: now) to now, never negative.
func sinceDeletion(deleted *metav1.Time, now time.Time) float64 {
	if deleted.IsZero() || now.Before(deleted.Time) {
		return 0
	}
	return now.Sub(deleted.Time).Seconds()
}
