package interruption

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/metrics"
)

// MessageTypeLabel is the label of karpenter_interruption_received_messages_total that holds the
// message's Kind.
const MessageTypeLabel = "message_type"

// Metrics are the interruption controller's Prometheus metrics; names and labels follow
// Karpenter's AWS provider.
type Metrics struct {
	// Received is karpenter_interruption_received_messages_total{message_type}.
	Received *prometheus.CounterVec
	// Deleted is karpenter_interruption_deleted_messages_total.
	Deleted prometheus.Counter
	// QueueDuration is karpenter_interruption_message_queue_duration_seconds: how long a message
	// waited in the queue before it was handled.
	QueueDuration prometheus.Histogram
	// Disrupted is karpenter_nodeclaims_disrupted_total{reason, nodepool, capacity_type}, shared
	// with the core controllers; the reason is the message's Kind.
	Disrupted *prometheus.CounterVec
}

// newMetrics returns unregistered metrics.
func newMetrics() *Metrics {
	return &Metrics{
		Received: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Karpenter, Subsystem: "interruption", Name: "received_messages_total",
			Help: "Messages received from the interruption queue, by message type."}, []string{MessageTypeLabel}),
		Deleted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metrics.Karpenter, Subsystem: "interruption", Name: "deleted_messages_total",
			Help: "Messages deleted from the interruption queue, handled or unparseable."}),
		QueueDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metrics.Karpenter, Subsystem: "interruption", Name: "message_queue_duration_seconds",
			Help:    "Time from a message's arrival in the interruption queue until it was handled.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300}}),
		Disrupted: metrics.NewNodeClaimsDisrupted(),
	}
}

// register registers m with reg (nil registers nothing) and returns the registered collectors,
// reusing those already registered.
func (m *Metrics) register(reg prometheus.Registerer) (*Metrics, error) {
	r := metrics.NewRegistrar(reg)
	out := &Metrics{
		Received: metrics.Add(r, m.Received), Deleted: metrics.Add(r, m.Deleted),
		QueueDuration: metrics.Add(r, m.QueueDuration), Disrupted: metrics.Add(r, m.Disrupted),
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("interruption metrics: %w", err)
	}
	return out, nil
}

// disrupted counts a NodeClaim deleted for a message of kind.
func (m *Metrics) disrupted(kind Kind, nc *karpv1.NodeClaim) {
	m.Disrupted.WithLabelValues(string(kind), nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.CapacityTypeLabelKey]).Inc()
}
