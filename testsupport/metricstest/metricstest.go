// Package metricstest reads Prometheus metrics in tests: the value of one collector, the series of
// a family in a registry, and the sum of the series that carry given labels. It is test support;
// non-test code must not import it.
package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value returns the value of a single-series collector (a counter or a gauge), or the sample count
// of a histogram or summary.
func Value(t testing.TB, c prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		t.Fatalf("read metric: %v", err)
	}
	return valueOf(&out)
}

// Family returns the series of the family called name in g, nil when g has none (a vector without
// series is not gathered).
func Family(t testing.TB, g prometheus.Gatherer, name string) []*dto.Metric {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatalf("gather metrics: %v", err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

// Sum returns the sum over the series of the family called name in g that carry every label of
// want (all of them when want is empty): counter and gauge values, histogram and summary sample
// counts. It is 0 when no series matches.
func Sum(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) float64 {
	t.Helper()
	sum := 0.0
	for _, m := range Family(t, g, name) {
		if HasLabels(m, want) {
			sum += valueOf(m)
		}
	}
	return sum
}

// Labels returns a series' labels as a map.
func Labels(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// HasLabels reports whether the series carries every label of want with its value.
func HasLabels(m *dto.Metric, want map[string]string) bool {
	labels := Labels(m)
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func valueOf(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	case m.GetSummary() != nil:
		return float64(m.GetSummary().GetSampleCount())
	case m.GetUntyped() != nil:
		return m.GetUntyped().GetValue()
	}
	return 0
}
