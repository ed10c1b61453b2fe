package provisioning

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/metrics"
)

// MetricsControllerName is the controller label of the provisioner's metrics, and of its calls
// to the cloud provider: "provisioner", as Karpenter names it.
const MetricsControllerName = "provisioner"

// CreatedProvisioned is the reason label of karpenter_nodeclaims_created_total for a NodeClaim
// the provisioner created for pending pods.
const CreatedProvisioned = "provisioned"

// Metrics are the provisioner's Prometheus metrics, named as Karpenter v1.14 names them.
type Metrics struct {
	// SchedulingDuration is karpenter_scheduler_scheduling_duration_seconds{controller}: time to
	// read the cluster and simulate scheduling for one batch (older Karpenter releases called it
	// karpenter_provisioner_scheduling_duration_seconds).
	SchedulingDuration *prometheus.HistogramVec
	// NodeClaimsCreated is karpenter_nodeclaims_created_total{reason, nodepool,
	// min_values_relaxed}: NodeClaims the provisioner created.
	NodeClaimsCreated *prometheus.CounterVec
	// UnschedulablePods is karpenter_scheduler_unschedulable_pods_count{controller}: pods the
	// last batch could not place.
	UnschedulablePods *prometheus.GaugeVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		SchedulingDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metrics.Karpenter, Subsystem: "scheduler",
			Name: "scheduling_duration_seconds", Help: "Duration of scheduling simulations used for deprovisioning and provisioning in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}, []string{metrics.ControllerLabel}),
		NodeClaimsCreated: metrics.NewNodeClaimsCreated(),
		UnschedulablePods: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Karpenter, Subsystem: "scheduler",
			Name: "unschedulable_pods_count", Help: "The number of unschedulable Pods. Labeled by the controller."}, []string{metrics.ControllerLabel}),
	}
	r := metrics.NewRegistrar(reg)
	m.SchedulingDuration = metrics.Add(r, m.SchedulingDuration)
	m.NodeClaimsCreated = metrics.Add(r, m.NodeClaimsCreated)
	m.UnschedulablePods = metrics.Add(r, m.UnschedulablePods)
	return metrics.Done(r, m)
}

// created counts a NodeClaim the provisioner created from plan.
func (m *Metrics) created(plan *scheduling.NodeClaimPlan) {
	m.NodeClaimsCreated.WithLabelValues(CreatedProvisioned, plan.NodePool.Name, strconv.FormatBool(plan.MinValuesRelaxed)).Inc()
}
