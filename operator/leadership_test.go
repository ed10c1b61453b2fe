package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	kptr "k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/testbed"
)

// Short leader-election timings, so that a term ends within seconds of a stolen Lease.
const (
	testLease   = 3 * time.Second
	testRenew   = 2 * time.Second
	testRetry   = 400 * time.Millisecond
	thiefLeaseS = 2 // seconds the thief holds the Lease
)

// TestRunCampaignsAgain runs the operator with leader election (Run) against a real apiserver,
// takes its Lease away (another holder writes it, as a replica that took over would), and checks
// what a term's end must guarantee: the leader-only work of the term stops within RenewDeadline,
// the next term's starts only after it has returned (never overlapping) and once the Lease is won
// again, the process keeps running, and nothing leaks from term to term.
func TestRunCampaignsAgain(t *testing.T) {
	env := testbed.StartForTest(t, testbed.Options{CRDDirs: []string{"../config/crd/bases"}})
	cs := kubernetes.NewForConfigOrDie(env.Config)

	t.Run("a lost Lease ends the term and the next campaigns again", func(t *testing.T) {
		ns := createNamespace(t, cs, "leader-recampaign")
		probe := newTermProbe(true)
		stopRun := startRun(t, env, ns, "runner", probe, 10*time.Second)

		first := probe.waitStarted(t, 1, 20*time.Second)
		waitHolder(t, cs, ns, "runner")
		lastRenewal := stealLease(t, cs, ns)
		probe.waitStopped(t, 1, testRenew+2*testRetry)
		// The fence: within RenewDeadline of the last renewal, before a follower could take over
		// (client-go alone stops the work a RetryPeriod later at the earliest).
		if d := probe.stopAsked(1).Sub(lastRenewal); d > testRenew+200*time.Millisecond {
			t.Errorf("term 1's leader-only work told to stop %s after the last renewal, want within RenewDeadline (%s)", d, testRenew)
		} else {
			t.Logf("term 1's leader-only work told to stop %s after the last renewal", d.Round(time.Millisecond))
		}
		// Term 1's work is still busy; the thief's Lease expires meanwhile, yet no term may start.
		holdNoTerm(t, probe, 2, time.Duration(thiefLeaseS)*time.Second+2*testRetry)
		returned := probe.finish(1)
		second := probe.waitStarted(t, 2, 10*time.Second)
		if !second.After(returned) {
			t.Fatalf("term 2 started at %s, before term 1's work returned at %s", second, returned)
		}
		waitHolder(t, cs, ns, "runner")
		t.Logf("term 1 elected at %s; term 2 elected %s after term 1's work returned", first.Format(time.StampMilli), second.Sub(returned).Round(time.Millisecond))

		// Two more terms: the process must not grow from one to the next.
		goroutines := []int{settledGoroutines()}
		for term := 3; term <= 4; term++ {
			stealLease(t, cs, ns)
			probe.waitStopped(t, term-1, testRenew+2*testRetry)
			probe.finish(term - 1)
			probe.waitStarted(t, term, 15*time.Second)
			goroutines = append(goroutines, settledGoroutines())
		}
		t.Logf("goroutines after terms 2, 3, 4: %v", goroutines)
		if grown := goroutines[2] - goroutines[0]; grown > 40 {
			t.Errorf("the process grew by %d goroutines over two terms (%v): a term leaks", grown, goroutines)
		}
		if err := stopRun(); err != nil {
			t.Fatalf("Run after ctx ended: %v", err)
		}
		// Run's last manager released the Lease on the way out.
		lease, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), LeaderElectionID, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if h := kptr.Deref(lease.Spec.HolderIdentity, ""); h != "" {
			t.Errorf("Lease still held by %q after Run returned", h)
		}
	})

	t.Run("leader-only work that never stops ends Run with an error", func(t *testing.T) {
		ns := createNamespace(t, cs, "leader-stuck")
		probe := newTermProbe(false)
		defer probe.finish(1)
		done := make(chan error, 1)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { done <- run(ctx, env.Config, testOptions(t, ns, "stuck", time.Second), probe.add) }()
		probe.waitStarted(t, 1, 20*time.Second)
		stealLease(t, cs, ns)
		select {
		case err := <-done:
			if err == nil || errors.Is(err, ErrLeadershipLost) || !strings.Contains(err.Error(), "still running") {
				t.Fatalf("Run = %v, want an error saying leader-only work is still running", err)
			}
		case <-time.After(testRenew + 6*time.Second):
			t.Fatal("Run went on although its leader-only work never stopped")
		}
		if probe.count() != 1 {
			t.Errorf("%d terms started, want 1", probe.count())
		}
	})

	t.Run("the same identity takes its own unexpired Lease at once", func(t *testing.T) {
		ns := createNamespace(t, cs, "leader-same-identity")
		// What a term that just lost the Lease leaves: the Lease still names this process and has
		// not expired. Another identity would have to wait the whole 60 s.
		now := metav1.NewMicroTime(time.Now())
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaderElectionID, Namespace: ns},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: kptr.To("same"), LeaseDurationSeconds: kptr.To[int32](60), RenewTime: &now, AcquireTime: &now}}
		if _, err := cs.CoordinationV1().Leases(ns).Create(context.Background(), lease, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		probe := newTermProbe(true)
		start := time.Now()
		stopRun := startRun(t, env, ns, "same", probe, 10*time.Second)
		elected := probe.waitStarted(t, 1, 15*time.Second)
		t.Logf("elected %s after Run started", elected.Sub(start).Round(time.Millisecond))
		if err := stopRun(); err != nil {
			t.Fatal(err)
		}
	})
}

// testOptions are the operator's options for these tests: the fake provider, a registry of its
// own, fixed ports (so a new term must wait for the old one's listeners), short timings.
func testOptions(t *testing.T, ns, identity string, grace time.Duration) Options {
	return Options{
		CloudProvider: cloudprovider.Static(fake.New()), Registerer: prometheus.NewRegistry(),
		Namespace: ns, WebhookHost: "127.0.0.1", WebhookPort: freePort(t),
		MetricsAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)), ProbeAddr: fmt.Sprintf("127.0.0.1:%d", freePort(t)),
		LeaderElect: true, LeaderElectionIdentity: identity,
		LeaseDuration: testLease, RenewDeadline: testRenew, RetryPeriod: testRetry,
		GracefulShutdown: grace, Log: testr.New(t), SkipControllerNameValidation: true,
	}
}

// startRun runs Run in the background and returns the function that stops it and returns its error.
func startRun(t *testing.T, env *testbed.Env, ns, identity string, probe *termProbe, grace time.Duration) func() error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, env.Config, testOptions(t, ns, identity, grace), probe.add) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		probe.releaseAll()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errors.New("Run did not return within 30s of its context ending")
		}
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// termProbe is a leader-only runnable added to every term's manager: it records when each term's
// copy starts and is told to stop, and, like a reconcile in flight, returns only when the test
// lets it (finish) and, when obeyStop, its context has ended.
type termProbe struct {
	obeyStop bool
	mu       sync.Mutex
	terms    []*probeTerm
}

type probeTerm struct {
	started, stopAsked, returned time.Time
	release                      chan struct{}
	released                     bool
}

func newTermProbe(obeyStop bool) *termProbe { return &termProbe{obeyStop: obeyStop} }

// add is Run's hook: it adds this term's copy of the probe through the operator's registrar.
func (p *termProbe) add(op *Operator) error {
	return op.registrar.Add(manager.RunnableFunc(func(ctx context.Context) error {
		p.mu.Lock()
		term := &probeTerm{started: time.Now(), release: make(chan struct{})}
		p.terms = append(p.terms, term)
		p.mu.Unlock()
		if p.obeyStop {
			<-ctx.Done()
			p.mu.Lock()
			term.stopAsked = time.Now()
			p.mu.Unlock()
		}
		<-term.release
		p.mu.Lock()
		term.returned = time.Now()
		p.mu.Unlock()
		return nil
	}))
}

func (p *termProbe) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.terms)
}

func (p *termProbe) term(n int) *probeTerm {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > len(p.terms) {
		return nil
	}
	return p.terms[n-1]
}

func (p *termProbe) stopAsked(n int) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.terms[n-1].stopAsked
}

// waitStarted waits until term n's probe has started (its manager was elected) and returns when.
func (p *termProbe) waitStarted(t *testing.T, n int, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	poll(t, timeout, fmt.Sprintf("term %d elected", n), func() bool {
		if term := p.term(n); term != nil {
			at = term.started
			return true
		}
		return false
	})
	return at
}

// waitStopped waits until term n's probe has been told to stop.
func (p *termProbe) waitStopped(t *testing.T, n int, timeout time.Duration) {
	t.Helper()
	poll(t, timeout, fmt.Sprintf("term %d's leader-only work told to stop", n), func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !p.terms[n-1].stopAsked.IsZero()
	})
}

// finish lets term n's probe return, and returns when it did.
func (p *termProbe) finish(n int) time.Time {
	p.mu.Lock()
	if n > len(p.terms) {
		p.mu.Unlock()
		return time.Time{}
	}
	term := p.terms[n-1]
	if !term.released {
		term.released = true
		close(term.release)
	}
	p.mu.Unlock()
	var at time.Time
	_ = wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		at = term.returned
		return !at.IsZero(), nil
	})
	return at
}

// releaseAll lets every probe return once its context ends.
func (p *termProbe) releaseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, term := range p.terms {
		if !term.released {
			term.released = true
			close(term.release)
		}
	}
}

// holdNoTerm fails the test if term n starts within d.
func holdNoTerm(t *testing.T, p *termProbe, n int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if p.term(n) != nil {
			t.Fatalf("term %d started while term %d's leader-only work was still running", n, n-1)
		}
		time.Sleep(50 * time.Millisecond) // polling an invariant over a fixed window
	}
}

func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("waiting %s for %s: %v", timeout, what, err)
	}
}

// stealLease writes another holder into the Lease, as a replica that took it over would, and
// returns the time of the last renewal it overwrote.
func stealLease(t *testing.T, cs kubernetes.Interface, ns string) time.Time {
	t.Helper()
	ctx := context.Background()
	var renewed time.Time
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		lease, err := cs.CoordinationV1().Leases(ns).Get(ctx, LeaderElectionID, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		if lease.Spec.RenewTime != nil {
			renewed = lease.Spec.RenewTime.Time
		}
		now := metav1.NewMicroTime(time.Now())
		lease.Spec.HolderIdentity = kptr.To("thief")
		lease.Spec.LeaseDurationSeconds = kptr.To[int32](thiefLeaseS)
		lease.Spec.RenewTime, lease.Spec.AcquireTime = &now, &now
		lease.Spec.LeaseTransitions = kptr.To(kptr.Deref(lease.Spec.LeaseTransitions, 0) + 1)
		if _, err := cs.CoordinationV1().Leases(ns).Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
			return false, nil // a renewal came in between: try again
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("steal the Lease: %v", err)
	}
	return renewed
}

// waitHolder waits until the Lease names holder.
func waitHolder(t *testing.T, cs kubernetes.Interface, ns, holder string) {
	t.Helper()
	var got string
	poll(t, 15*time.Second, "Lease held by "+holder, func() bool {
		lease, err := cs.CoordinationV1().Leases(ns).Get(context.Background(), LeaderElectionID, metav1.GetOptions{})
		if err != nil {
			return false
		}
		got = kptr.Deref(lease.Spec.HolderIdentity, "")
		return got == holder
	})
}

func createNamespace(t *testing.T, cs kubernetes.Interface, name string) string {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// settledGoroutines returns the goroutine count once it has stopped moving for a second (a new
// term's informers and workers take a moment to start).
func settledGoroutines() int {
	last := runtime.NumGoroutine()
	for range 20 {
		time.Sleep(time.Second) // sampling the count over time
		n := runtime.NumGoroutine()
		if n == last {
			return n
		}
		last = n
	}
	return last
}
