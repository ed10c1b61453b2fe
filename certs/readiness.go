package certs

import (
	"errors"
	"net/http"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// readiness turns true once the serving certificate is loaded and every webhook configuration trusts it,
// and then stays true for the life of the process. It latches on purpose: during a CA rotation every
// replica would otherwise turn unready at the same moment, the Service would lose all endpoints, and a
// failurePolicy=Fail webhook would block the cluster (complaint #1 of the reference). A later problem is
// repaired by the reconciler, which keeps running, and is visible in its log, Events and metrics.
type readiness struct {
	ready atomic.Bool
	why   atomic.Pointer[string]
}

func (r *readiness) update(problem string) {
	if problem == "" {
		r.ready.Store(true)
		return
	}
	r.why.Store(&problem)
}

func (r *readiness) isReady() bool { return r.ready.Load() }

func (r *readiness) checker() healthz.Checker {
	return func(*http.Request) error {
		if r.ready.Load() {
			return nil
		}
		if why := r.why.Load(); why != nil {
			return errors.New("webhook certificate not ready: " + *why)
		}
		return errors.New("webhook certificate not ready: not reconciled yet")
	}
}
