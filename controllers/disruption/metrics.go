package disruption

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/metrics"
)

// Label names of the disruption metrics, as Karpenter v1.14 spells them.
const (
	decisionLabel          = "decision"
	consolidationTypeLabel = "consolidation_type"
)

// Metrics are the disruption controller's Prometheus metrics, with Karpenter v1.14's names and
// labels, so its dashboards and alerts work unchanged.
type Metrics struct {
	// Decisions is karpenter_voluntary_disruption_decisions_total{decision, reason,
	// consolidation_type}: commands started.
	Decisions *prometheus.CounterVec
	// DecisionsByNodePool is karpenter_voluntary_disruption_decisions_by_nodepool_total.
	DecisionsByNodePool *prometheus.CounterVec
	// EligibleNodes is karpenter_voluntary_disruption_eligible_nodes{reason}: candidates of the
	// last pass per method.
	EligibleNodes *prometheus.GaugeVec
	// EvaluationDuration is karpenter_voluntary_disruption_decision_evaluation_duration_seconds
	// {reason, consolidation_type}: one method of one pass (the validation wait not included).
	EvaluationDuration *prometheus.HistogramVec
	// Timeouts is karpenter_voluntary_disruption_consolidation_timeouts_total{consolidation_type}.
	Timeouts *prometheus.CounterVec
	// FailedValidations is karpenter_voluntary_disruption_failed_validations_total
	// {consolidation_type}: candidates of commands that failed validation.
	FailedValidations *prometheus.CounterVec
	// QueueFailures is karpenter_voluntary_disruption_queue_failures_total{decision, reason,
	// consolidation_type}: commands rolled back (consolidation_type holds the consolidation type,
	// not the decision as in Karpenter v1.14's bug).
	QueueFailures *prometheus.CounterVec
	// AllowedDisruptions is karpenter_nodepools_allowed_disruptions{nodepool, reason}: the budget
	// before disrupting nodes are subtracted.
	AllowedDisruptions *prometheus.GaugeVec
	// NodesConsumingBudgets is karpenter_nodepools_nodes_consuming_budgets{nodepool, reason}: the
	// NodePool's nodes that count against its budgets (NotReady, deleting, or disrupting).
	NodesConsumingBudgets *prometheus.GaugeVec
	// NodeClaimsDisrupted is karpenter_nodeclaims_disrupted_total{reason, nodepool, capacity_type},
	// shared with the lifecycle controller and garbage collection.
	NodeClaimsDisrupted *prometheus.CounterVec
	// NodeClaimsCreated is karpenter_nodeclaims_created_total, shared with the provisioner:
	// replacements count with reason "underutilized".
	NodeClaimsCreated *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	const ns, sub = metrics.Karpenter, "voluntary_disruption"
	m := &Metrics{
		Decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "decisions_total",
			Help: "Number of disruption decisions performed. Labeled by disruption decision, reason, and consolidation type."},
			[]string{decisionLabel, metrics.ReasonLabel, consolidationTypeLabel}),
		DecisionsByNodePool: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "decisions_by_nodepool_total",
			Help: "Number of disruption decisions performed per nodepool. Labeled by nodepool, disruption decision, reason, and consolidation type."},
			[]string{metrics.NodePoolLabel, decisionLabel, metrics.ReasonLabel, consolidationTypeLabel}),
		EligibleNodes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "eligible_nodes",
			Help: "Number of nodes eligible for disruption by Karpenter. Labeled by disruption reason."}, []string{metrics.ReasonLabel}),
		EvaluationDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "decision_evaluation_duration_seconds",
			Help:    "Duration of the disruption decision evaluation process in seconds. Labeled by method and consolidation type.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600}},
			[]string{metrics.ReasonLabel, consolidationTypeLabel}),
		Timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "consolidation_timeouts_total",
			Help: "Number of times the Consolidation algorithm has reached a timeout. Labeled by consolidation type."}, []string{consolidationTypeLabel}),
		FailedValidations: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "failed_validations_total",
			Help: "Number of candidates that were selected for disruption but failed validation. Labeled by consolidation type."}, []string{consolidationTypeLabel}),
		QueueFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "queue_failures_total",
			Help: "The number of times that an enqueued disruption decision failed. Labeled by disruption method."},
			[]string{decisionLabel, metrics.ReasonLabel, consolidationTypeLabel}),
		AllowedDisruptions: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Karpenter, Subsystem: "nodepools", Name: "allowed_disruptions",
			Help: "The number of nodes for a given NodePool that can be concurrently disrupting at a point in time. Labeled by NodePool and reason."},
			[]string{metrics.NodePoolLabel, metrics.ReasonLabel}),
		NodesConsumingBudgets: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Karpenter, Subsystem: "nodepools", Name: "nodes_consuming_budgets",
			Help: "The number of nodes for a given NodePool that are consuming its disruption budgets. Labeled by NodePool and reason."},
			[]string{metrics.NodePoolLabel, metrics.ReasonLabel}),
		NodeClaimsDisrupted: metrics.NewNodeClaimsDisrupted(),
		NodeClaimsCreated:   metrics.NewNodeClaimsCreated(),
	}
	r := metrics.NewRegistrar(reg)
	for _, v := range []**prometheus.CounterVec{&m.Decisions, &m.DecisionsByNodePool, &m.Timeouts, &m.FailedValidations, &m.QueueFailures, &m.NodeClaimsDisrupted, &m.NodeClaimsCreated} {
		*v = metrics.Add(r, *v)
	}
	for _, v := range []**prometheus.GaugeVec{&m.EligibleNodes, &m.AllowedDisruptions, &m.NodesConsumingBudgets} {
		*v = metrics.Add(r, *v)
	}
	m.EvaluationDuration = metrics.Add(r, m.EvaluationDuration)
	for _, t := range []string{"multi", "single"} {
		m.Timeouts.WithLabelValues(t)
	}
	return metrics.Done(r, m)
}
