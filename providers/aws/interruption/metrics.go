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

// countDisrupted counts a NodeClaim deleted for reason in karpenter_nodeclaims_disrupted_total.
func countDisrupted(c *prometheus.CounterVec, reason string, nc *karpv1.NodeClaim) {
	c.WithLabelValues(reason, nc.Labels[karpv1.NodePoolLabelKey], nc.Labels[karpv1.CapacityTypeLabelKey]).Inc()
}

// InstanceStatusMetrics are the instance-status poller's Prometheus metrics.
type InstanceStatusMetrics struct {
	// Unhealthy is karpenter_interruption_instance_status_unhealthy_total{category}: the
	// cluster's instances each poll found unhealthy, by Category (an instance counts once per
	// poll and category).
	Unhealthy *prometheus.CounterVec
	// Errors is joiner_interruption_instance_status_errors_total{error}: polls that could not
	// read EC2, by AWS error code ("" when the error has none).
	Errors *prometheus.CounterVec
	// Disrupted is karpenter_nodeclaims_disrupted_total, shared with the core controllers; the
	// reason is the Category.
	Disrupted *prometheus.CounterVec
}

// CategoryLabel is the label of karpenter_interruption_instance_status_unhealthy_total.
const CategoryLabel = "category"

func newInstanceStatusMetrics() *InstanceStatusMetrics {
	return &InstanceStatusMetrics{
		Unhealthy: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Karpenter, Subsystem: "interruption", Name: "instance_status_unhealthy_total",
			Help: "Unhealthy instances found by the instance status poller, by category."}, []string{CategoryLabel}),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Joiner, Subsystem: "interruption", Name: "instance_status_errors_total",
			Help: "Instance status polls that could not read EC2, by AWS error code."}, []string{metrics.ErrorLabel}),
		Disrupted: metrics.NewNodeClaimsDisrupted(),
	}
}

// register registers m with reg (nil registers nothing) and returns the registered collectors,
// reusing those already registered.
func (m *InstanceStatusMetrics) register(reg prometheus.Registerer) (*InstanceStatusMetrics, error) {
	r := metrics.NewRegistrar(reg)
	out := &InstanceStatusMetrics{Unhealthy: metrics.Add(r, m.Unhealthy), Errors: metrics.Add(r, m.Errors), Disrupted: metrics.Add(r, m.Disrupted)}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("instance status metrics: %w", err)
	}
	return out, nil
}
