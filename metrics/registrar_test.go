package metrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

type pair struct{ a, b *prometheus.CounterVec }

func newPair(reg prometheus.Registerer, help string) (*pair, error) {
	p := &pair{
		a: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Joiner, Name: "a_total", Help: help}, []string{ReasonLabel}),
		b: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Joiner, Name: "b_total", Help: "b"}, []string{ReasonLabel}),
	}
	r := NewRegistrar(reg)
	p.a = Add(r, p.a)
	p.b = Add(r, p.b)
	return Done(r, p)
}

func TestRegistrar(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := newPair(reg, "a")
	if err != nil || first == nil {
		t.Fatalf("first registration: %v, %v", first, err)
	}
	second, err := newPair(reg, "a")
	if err != nil {
		t.Fatalf("second registration: %v", err)
	}
	if second.a != first.a || second.b != first.b {
		t.Error("a second registration of the same metrics did not reuse the registered collectors")
	}
	// The same name with another help text is a different descriptor: registration fails, and
	// Done returns nil with the error.
	bad, err := newPair(reg, "other help")
	if err == nil || bad != nil {
		t.Errorf("conflicting registration = %v, %v; want nil and an error", bad, err)
	}
	// A nil registry registers nothing and keeps the collectors.
	if p, err := newPair(nil, "a"); err != nil || p == nil || p.a == first.a {
		t.Errorf("nil registry = %v, %v; want new collectors and no error", p, err)
	}
}
