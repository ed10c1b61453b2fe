package certs

import (
	"crypto/x509"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric label values for the "cert" label.
const (
	certLabelLeaf = "leaf"
	certLabelCA   = "ca"
)

// Metrics are the Prometheus metrics of this package. Create them once per process with NewMetrics
// and share them between reconcilers through Options.Metrics / CertManagerOptions.Metrics.
//
//   - joiner_webhook_cert_expiry_timestamp_seconds{cert="leaf"|"ca"}: NotAfter of the served leaf and of
//     the CA that signs new leaves (Unix seconds).
//   - joiner_webhook_cert_rotations_total{cert="leaf"|"ca"}: times this process saw the served leaf or the
//     signing CA replaced by a different one (the first load does not count).
type Metrics struct {
	expiry    *prometheus.GaugeVec
	rotations *prometheus.CounterVec
}

// NewMetrics creates the metrics and registers them with reg, e.g. controller-runtime's metrics.Registry.
// A nil reg creates them without registering. Registering twice with one registry fails.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		expiry: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "joiner_webhook_cert_expiry_timestamp_seconds",
			Help: "NotAfter of the webhook serving certificate (cert=leaf) and of the CA signing it (cert=ca), in Unix seconds.",
		}, []string{"cert"}),
		rotations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "joiner_webhook_cert_rotations_total",
			Help: "Times the served webhook certificate (cert=leaf) or the signing CA (cert=ca) was replaced, as seen by this process.",
		}, []string{"cert"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.expiry, m.rotations} {
		if err := reg.Register(c); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("register webhook certificate metrics: %w", err)
	}
	return m, nil
}

// observe records c as the current certificate of kind cert; rotated says it replaced a different one.
func (m *Metrics) observe(cert string, c *x509.Certificate, rotated bool) {
	if m == nil || c == nil {
		return
	}
	m.expiry.WithLabelValues(cert).Set(float64(c.NotAfter.Unix()))
	if rotated {
		m.rotations.WithLabelValues(cert).Inc()
	}
}
