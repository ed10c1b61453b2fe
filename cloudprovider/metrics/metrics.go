package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	jmetrics "github.com/joiner-dev/joiner/metrics"
)

// Metrics are the cloud provider metrics, named as Karpenter names them.
type Metrics struct {
	// Duration is karpenter_cloudprovider_duration_seconds{controller, method, provider}: how long
	// each call to the cloud provider took, errors included.
	Duration *prometheus.HistogramVec
	// Errors is karpenter_cloudprovider_errors_total{controller, method, provider, error}: calls
	// that returned an error, by the error's type (see ErrorType).
	Errors *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg; nil skips registration. Metrics
// already registered with reg are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	labels := []string{jmetrics.ControllerLabel, jmetrics.MethodLabel, jmetrics.ProviderLabel}
	m := &Metrics{
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: jmetrics.Karpenter, Subsystem: "cloudprovider", Name: "duration_seconds",
			Help:    "Duration of cloud provider method calls. Labeled by the controller, method name and provider.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 15)}, labels),
		Errors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: jmetrics.Karpenter, Subsystem: "cloudprovider", Name: "errors_total",
			Help: "Total number of errors returned from cloud provider calls. Labeled by the controller, method name, provider and error type."},
			[]string{jmetrics.ControllerLabel, jmetrics.MethodLabel, jmetrics.ProviderLabel, jmetrics.ErrorLabel}),
	}
	r := jmetrics.NewRegistrar(reg)
	m.Duration = jmetrics.Add(r, m.Duration)
	m.Errors = jmetrics.Add(r, m.Errors)
	return jmetrics.Done(r, m)
}
