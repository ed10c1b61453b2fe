package operator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// leaderWork is the leader-only work of one manager (one term): it records which leader-only
// runnables are running, and fences them off once the Lease has gone unrenewed for RenewDeadline.
//
// controller-runtime stops a manager that lost its Lease without waiting for its runnables (it
// expects the process to exit), so before a new manager campaigns in the same process, Start waits
// here until every one of them has returned: no reconcile of one term overlaps the next, and none
// can launch a NodeClaim the next leader launches too. And client-go stops the runnables only
// after it also tried to release the Lease, which against an unreachable API server takes up to
// another RenewDeadline/2; the fence stops them at RenewDeadline after the last renewal, before any
// follower may take the Lease over (LeaseDuration after it saw that renewal).
type leaderWork struct {
	mu      sync.Mutex
	running map[*trackedRunnable]chan struct{}
	// over is set by wait: the term has ended, and a runnable whose Start comes later (the
	// manager's goroutine lagging behind its stop) must not run.
	over bool

	// renewDeadline is how long after the last renewal the fence closes.
	renewDeadline time.Duration
	clock         clock.WithDelayedExecution
	timer         clock.Timer
	// fenced is cancelled when the fence closes; every leader-only runnable's context ends with it.
	fenced context.Context
	fence  context.CancelFunc
}

// newLeaderWork returns the leader-only work of a term whose Lease must be renewed within
// renewDeadline; the clock is the real one, as client-go's leader election uses.
func newLeaderWork(renewDeadline time.Duration, clk clock.WithDelayedExecution) *leaderWork {
	w := &leaderWork{renewDeadline: renewDeadline, clock: clk}
	w.fenced, w.fence = context.WithCancel(context.Background())
	return w
}

// renewed records that this replica has just written the Lease as its holder, and (re)arms the
// fence for renewDeadline from now.
func (w *leaderWork) renewed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = w.clock.AfterFunc(w.renewDeadline, w.fence)
}

// released records that this replica gave the Lease up: it leads no more, so the fence closes.
func (w *leaderWork) released() { w.fence() }

// isFenced reports whether the fence has closed.
func (w *leaderWork) isFenced() bool { return w.fenced.Err() != nil }

// stop disarms the fence's timer; the term is over.
func (w *leaderWork) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timer != nil {
		w.timer.Stop()
	}
	w.fence()
}

// begin records that r started, and returns the function that records that it returned; ok is
// false, and r must not run, once the term is over.
func (w *leaderWork) begin(r *trackedRunnable) (end func(), ok bool) {
	done := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.over {
		return nil, false
	}
	if w.running == nil {
		w.running = map[*trackedRunnable]chan struct{}{}
	}
	w.running[r] = done
	return func() {
		w.mu.Lock()
		delete(w.running, r)
		w.mu.Unlock()
		close(done)
	}, true
}

// wait ends the term: it returns once every leader-only runnable that started has returned, or,
// after timeout, an error naming those still running. None starts after it is called.
func (w *leaderWork) wait(timeout time.Duration) error {
	w.mu.Lock()
	w.over = true
	pending := make([]chan struct{}, 0, len(w.running))
	for _, done := range w.running {
		pending = append(pending, done)
	}
	w.mu.Unlock()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for _, done := range pending {
		select {
		case <-done:
		case <-deadline.C:
			return fmt.Errorf("leader-only work still running %s after the manager stopped: %v", timeout, w.names())
		}
	}
	return nil
}

// names lists the runnables still running, by type.
func (w *leaderWork) names() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for r := range w.running {
		out = append(out, fmt.Sprintf("%T", r.Runnable))
	}
	slices.Sort(out)
	return out
}

// trackingManager is the manager the operator hands to the packages that register runnables,
// readiness checks and webhooks: it adds them to the real manager unchanged, except that the
// runnables controller-runtime runs only on the leader are wrapped so that leaderWork knows when
// they have returned, and the webhooks are served behind the readiness checks (readinessGate).
type trackingManager struct {
	manager.Manager
	work *leaderWork
	gate *readinessGate
}

// AddReadyzCheck adds a readiness check, which the webhooks also wait for.
func (m trackingManager) AddReadyzCheck(name string, check healthz.Checker) error {
	if err := m.Manager.AddReadyzCheck(name, check); err != nil {
		return err
	}
	m.gate.add(name, check)
	return nil
}

// GetWebhookServer returns the webhook server, registering webhooks behind the readiness gate.
func (m trackingManager) GetWebhookServer() webhook.Server {
	return gatedWebhookServer{Server: m.Manager.GetWebhookServer(), gate: m.gate}
}

// Add adds r to the manager, tracking it when it runs on the leader only.
func (m trackingManager) Add(r manager.Runnable) error {
	if !leaderOnly(r) {
		return m.Manager.Add(r)
	}
	t := &trackedRunnable{Runnable: r, work: m.work}
	if w, ok := r.(warmupRunnable); ok {
		return m.Manager.Add(&trackedWarmupRunnable{trackedRunnable: t, warm: w})
	}
	return m.Manager.Add(t)
}

// leaderOnly reports whether controller-runtime puts r in its leader-election group, by the same
// rules as manager.Manager.Add: caches, webhook and HTTP servers run on every replica, as do
// runnables that say so; the rest wait for the lease.
func leaderOnly(r manager.Runnable) bool {
	switch v := r.(type) {
	case *manager.Server:
		return false // an HTTP server; whichever group holds it, no reconcile runs in it
	case interface{ GetCache() cache.Cache }:
		return false
	case webhook.Server:
		return false
	case manager.LeaderElectionRunnable:
		return v.NeedLeaderElection()
	default:
		return true
	}
}

// warmupRunnable is controller-runtime's interface of a runnable that can start before it is
// elected (controllers implement it; it does nothing unless the controller enables warm-up).
type warmupRunnable interface {
	Warmup(context.Context) error
}

// trackedRunnable is a leader-only runnable whose Start leaderWork follows.
type trackedRunnable struct {
	manager.Runnable
	work *leaderWork
}

// NeedLeaderElection keeps the runnable in the leader-election group.
func (r *trackedRunnable) NeedLeaderElection() bool { return true }

// Start runs the runnable, with a context that also ends when the fence closes, and records when
// it returns; it does nothing once the term is over.
func (r *trackedRunnable) Start(ctx context.Context) error {
	end, ok := r.work.begin(r)
	if !ok {
		return nil
	}
	defer end()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.work.fenced, cancel)()
	return r.Runnable.Start(ctx)
}

// trackedWarmupRunnable is a trackedRunnable that keeps its runnable's Warmup.
type trackedWarmupRunnable struct {
	*trackedRunnable
	warm warmupRunnable
}

// Warmup calls the runnable's Warmup.
func (r *trackedWarmupRunnable) Warmup(ctx context.Context) error { return r.warm.Warmup(ctx) }
