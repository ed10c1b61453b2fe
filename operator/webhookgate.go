package operator

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// readinessGate holds the admission webhooks back until the operator is ready: every readiness
// check registered through the trackingManager (the serving certificate, the compiled policies)
// has passed once. Without it a manager built again in the same process (Run, after a lost Lease)
// would answer admission requests with a policy engine that has not compiled the policies yet,
// while its pod is still Ready in the Service's endpoints: the kubelet notices the failing
// readiness probe only periods later. A new process has no such window, since its pod starts
// not Ready.
type readinessGate struct {
	mu     sync.Mutex
	checks map[string]healthz.Checker
	open   atomic.Bool
}

// add records a readiness check the gate waits for.
func (g *readinessGate) add(name string, check healthz.Checker) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.checks == nil {
		g.checks = map[string]healthz.Checker{}
	}
	g.checks[name] = check
}

// ready reports, for req, whether every check passes; once they all have, the gate stays open.
func (g *readinessGate) ready(req *http.Request) error {
	if g.open.Load() {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for name, check := range g.checks {
		if err := check(req); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	g.open.Store(true)
	return nil
}

// wrap returns hook behind the gate: until the operator is ready it answers 503, which the API
// server treats as an unreachable webhook (failurePolicy decides), as it would a pod not yet Ready.
func (g *readinessGate) wrap(hook http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := g.ready(req); err != nil {
			http.Error(w, "Joiner is not ready to answer admission requests yet: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		hook.ServeHTTP(w, req)
	})
}

// gatedWebhookServer is the webhook server with every webhook registered behind the gate.
type gatedWebhookServer struct {
	webhook.Server
	gate *readinessGate
}

// Register serves hook at path, behind the gate.
func (s gatedWebhookServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, s.gate.wrap(hook))
}
