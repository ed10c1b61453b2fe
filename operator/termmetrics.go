package operator

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// termRegisterer is the Registerer one manager (one term of Run) registers its metrics with: it
// passes every registration to the operator's Registerer and remembers the collectors it added, so
// that when the term ends they are unregistered and the next term's manager registers its own, as
// a restarted process would (counters start again from zero, which Prometheus reads as a reset,
// and no gauge keeps a value the old term set). Errors pass through unchanged, so a collector
// already registered in the same term is still shared (metrics.Register).
type termRegisterer struct {
	prometheus.Registerer
	mu    sync.Mutex
	added []prometheus.Collector
}

// Register registers c and remembers it.
func (r *termRegisterer) Register(c prometheus.Collector) error {
	if err := r.Registerer.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	r.added = append(r.added, c)
	r.mu.Unlock()
	return nil
}

// MustRegister registers cs, panicking on an error as prometheus.Registerer does.
func (r *termRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// unregisterAll unregisters every collector this term registered.
func (r *termRegisterer) unregisterAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.added {
		r.Registerer.Unregister(c)
	}
	r.added = nil
}
