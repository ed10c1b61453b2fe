package metricstest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestReaders(t *testing.T) {
	reg := prometheus.NewRegistry()
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "c"}, []string{"reason", "nodepool"})
	hist := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"})
	gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "g"})
	reg.MustRegister(vec, hist, gauge)
	vec.WithLabelValues("empty", "a").Add(2)
	vec.WithLabelValues("empty", "b").Add(3)
	vec.WithLabelValues("drifted", "a").Inc()
	hist.Observe(1)
	hist.Observe(2)
	gauge.Set(7)

	tests := []struct {
		name string
		got  float64
		want float64
	}{
		{"sum of all series", Sum(t, reg, "c_total", nil), 6},
		{"sum by one label", Sum(t, reg, "c_total", map[string]string{"reason": "empty"}), 5},
		{"sum by two labels", Sum(t, reg, "c_total", map[string]string{"reason": "empty", "nodepool": "b"}), 3},
		{"no matching series", Sum(t, reg, "c_total", map[string]string{"reason": "expired"}), 0},
		{"unknown label", Sum(t, reg, "c_total", map[string]string{"zone": ""}), 0},
		{"missing family", Sum(t, reg, "nope", nil), 0},
		{"histogram count", Sum(t, reg, "h_seconds", nil), 2},
		{"gauge", Sum(t, reg, "g", nil), 7},
		{"one counter", Value(t, vec.WithLabelValues("drifted", "a")), 1},
		{"one histogram", Value(t, hist), 2},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	if n := len(Family(t, reg, "c_total")); n != 3 {
		t.Errorf("Family(c_total) has %d series, want 3", n)
	}
}
