package garbagecollection

import (
	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/metrics"
)

// DisruptedGarbageCollected is the reason label of karpenter_nodeclaims_disrupted_total for a
// NodeClaim deleted because its instance was gone.
const DisruptedGarbageCollected = "garbage_collected"

// Metrics are garbage collection's Prometheus metrics.
type Metrics struct {
	// InstancesTerminated is joiner_garbage_collection_instances_terminated_total: instances
	// without a NodeClaim that were terminated (directly, or by handing their Node to
	// termination). Karpenter has no such counter.
	InstancesTerminated prometheus.Counter
	// Disrupted is karpenter_nodeclaims_disrupted_total{reason, nodepool, capacity_type}, shared
	// with the NodeClaim lifecycle controller: garbage collection counts the NodeClaims it deletes
	// because their instance was gone, with reason "garbage_collected".
	Disrupted *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg (by an earlier call, or by the lifecycle controller for Disrupted)
// are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		InstancesTerminated: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Joiner, Subsystem: "garbage_collection",
			Name: "instances_terminated_total", Help: "Cloud instances without a NodeClaim that garbage collection terminated."}),
		Disrupted: metrics.NewNodeClaimsDisrupted(),
	}
	r := metrics.NewRegistrar(reg)
	m.InstancesTerminated = metrics.Add(r, m.InstancesTerminated)
	m.Disrupted = metrics.Add(r, m.Disrupted)
	return metrics.Done(r, m)
}

// nodeClaimDeleted counts a NodeClaim deleted because its instance was gone.
func (m *Metrics) nodeClaimDeleted(nc *karpv1.NodeClaim) {
	m.Disrupted.WithLabelValues(DisruptedGarbageCollected, nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.CapacityTypeLabelKey]).Inc()
}
