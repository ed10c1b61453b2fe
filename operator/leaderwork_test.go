package operator

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

func TestCheckLeaderElectionTimings(t *testing.T) {
	tests := []struct {
		name                string
		lease, renew, retry time.Duration
		wantErr             string
	}{
		{name: "defaults", lease: DefaultLeaseDuration, renew: DefaultRenewDeadline, retry: DefaultRetryPeriod},
		{name: "short", lease: 3 * time.Second, renew: 2 * time.Second, retry: 400 * time.Millisecond},
		{name: "renew deadline equal to the lease", lease: 10 * time.Second, renew: 10 * time.Second, retry: time.Second,
			wantErr: "--leader-elect-renew-deadline 10s must be shorter than --leader-elect-lease-duration 10s"},
		{name: "renew deadline longer than the lease", lease: 10 * time.Second, renew: 20 * time.Second, retry: time.Second,
			wantErr: "must be shorter than --leader-elect-lease-duration"},
		{name: "retry period too close to the renew deadline", lease: 15 * time.Second, renew: 10 * time.Second, retry: 9 * time.Second,
			wantErr: "--leader-elect-renew-deadline 10s must be longer than 1.2 times --leader-elect-retry-period 9s"},
		{name: "lease under a second", lease: 500 * time.Millisecond, renew: 400 * time.Millisecond, retry: 100 * time.Millisecond,
			wantErr: "--leader-elect-lease-duration 500ms: want at least 1s"},
		{name: "no retry period", lease: 15 * time.Second, renew: 10 * time.Second, retry: 0,
			wantErr: "--leader-elect-retry-period 0s: want a positive duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckLeaderElectionTimings(tt.lease, tt.renew, tt.retry)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestFenceClosesRenewDeadlineAfterTheLastRenewal drives the fence with a fake clock: it stays
// open while renewals come within RenewDeadline, closes RenewDeadline after the last one, and closes
// at once on a release.
func TestFenceClosesRenewDeadlineAfterTheLastRenewal(t *testing.T) {
	const deadline = 10 * time.Second
	tests := []struct {
		name string
		// steps alternate: a renewal ("renew"), a release ("release") or a clock step.
		steps      []any
		wantFenced bool
	}{
		{name: "never renewed (a follower)", steps: []any{time.Hour}},
		{name: "renewed, then within the deadline", steps: []any{"renew", deadline - time.Millisecond}},
		{name: "renewed, then the deadline passes", steps: []any{"renew", deadline}, wantFenced: true},
		{name: "renewals keep it open", steps: []any{"renew", 8 * time.Second, "renew", 8 * time.Second, "renew", 8 * time.Second}},
		{name: "the deadline counts from the last renewal", steps: []any{"renew", 8 * time.Second, "renew", deadline}, wantFenced: true},
		{name: "released", steps: []any{"renew", time.Second, "release"}, wantFenced: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			w := newLeaderWork(deadline, clk)
			for _, s := range tt.steps {
				switch s := s.(type) {
				case string:
					if s == "renew" {
						w.renewed()
					} else {
						w.released()
					}
				case time.Duration:
					clk.Step(s)
				}
			}
			if got := w.isFenced(); got != tt.wantFenced {
				t.Errorf("fenced = %v, want %v", got, tt.wantFenced)
			}
		})
	}
}

// TestTrackedRunnable checks what the term's bookkeeping promises a leader-only runnable: its
// context ends when the fence closes, wait returns only once it has returned, and once the term is
// over a late Start runs nothing.
func TestTrackedRunnable(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	w := newLeaderWork(time.Second, clk)
	release := make(chan struct{})
	started := make(chan struct{})
	r := &trackedRunnable{work: w, Runnable: manager.RunnableFunc(func(ctx context.Context) error {
		close(started)
		<-ctx.Done()
		<-release
		return nil
	})}
	go func() { _ = r.Start(context.Background()) }()
	<-started
	w.renewed()
	clk.Step(time.Second) // the fence closes: the runnable's context ends, but it is still busy
	if err := w.wait(50 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "manager.RunnableFunc") {
		t.Fatalf("wait while the runnable runs = %v, want an error naming it", err)
	}
	close(release)
	if err := w.wait(5 * time.Second); err != nil {
		t.Fatalf("wait after the runnable returned: %v", err)
	}
	ran := false
	late := &trackedRunnable{work: w, Runnable: manager.RunnableFunc(func(context.Context) error { ran = true; return nil })}
	if err := late.Start(context.Background()); err != nil || ran {
		t.Errorf("a Start after the term ended ran the runnable (err %v)", err)
	}
}

// leaderRunnable says whether it needs leader election, and can warm up, as controllers do.
type leaderRunnable bool

func (leaderRunnable) Start(context.Context) error  { return nil }
func (l leaderRunnable) NeedLeaderElection() bool   { return bool(l) }
func (leaderRunnable) Warmup(context.Context) error { return nil }

// cacheRunnable is what controller-runtime puts in its caches group.
type cacheRunnable struct{}

func (cacheRunnable) Start(context.Context) error { return nil }
func (cacheRunnable) GetCache() cache.Cache       { return nil }

// webhookServer is a webhook.Server; only its type matters here.
type webhookServer struct{ webhook.Server }

func TestLeaderOnly(t *testing.T) {
	tests := []struct {
		name string
		r    manager.Runnable
		want bool
	}{
		{name: "a runnable that says nothing (controller-runtime's default group)", r: manager.RunnableFunc(func(context.Context) error { return nil }), want: true},
		{name: "needs leader election", r: leaderRunnable(true), want: true},
		{name: "runs on every replica", r: leaderRunnable(false), want: false},
		{name: "a cache", r: cacheRunnable{}, want: false},
		{name: "a webhook server", r: webhookServer{}, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := leaderOnly(tt.r); got != tt.want {
				t.Errorf("leaderOnly = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestReadinessGate(t *testing.T) {
	tests := []struct {
		name string
		// checks are the readiness checks' results, in order of the requests.
		checks   [][]error
		wantCode []int
	}{
		{name: "no checks", checks: [][]error{nil}, wantCode: []int{http.StatusOK}},
		{name: "ready", checks: [][]error{{nil, nil}}, wantCode: []int{http.StatusOK}},
		{name: "one check failing", checks: [][]error{{nil, errors.New("policies not compiled")}}, wantCode: []int{http.StatusServiceUnavailable}},
		{name: "opens once ready and stays open", checks: [][]error{{errors.New("no certificate")}, {nil}, {errors.New("a later failure")}},
			wantCode: []int{http.StatusServiceUnavailable, http.StatusOK, http.StatusOK}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := &readinessGate{}
			request := 0
			for i := range tt.checks[0] {
				g.add(string(rune('a'+i)), func(*http.Request) error { return tt.checks[min(request, len(tt.checks)-1)][i] })
			}
			h := g.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			for ; request < len(tt.wantCode); request++ {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/validate", nil))
				if rec.Code != tt.wantCode[request] {
					t.Errorf("request %d: code %d, want %d (%s)", request, rec.Code, tt.wantCode[request], rec.Body)
				}
			}
		})
	}
}

// TestTermRegisterer checks that a term's metrics leave the registry when it ends, so the next
// term registers collectors of the same names without an error.
func TestTermRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	newCounter := func() prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "joiner_test_total", Help: "test"})
	}
	term1 := &termRegisterer{Registerer: reg}
	c1 := newCounter()
	term1.MustRegister(c1)
	c1.Inc()
	var are prometheus.AlreadyRegisteredError
	if err := term1.Register(newCounter()); !errors.As(err, &are) || are.ExistingCollector != c1 {
		t.Fatalf("a second registration in the same term = %v, want AlreadyRegisteredError with the first collector", err)
	}
	term1.unregisterAll()
	term2 := &termRegisterer{Registerer: reg}
	c2 := newCounter()
	if err := term2.Register(c2); err != nil {
		t.Fatalf("the next term's registration: %v", err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetMetric()[0].GetCounter().GetValue() != 0 {
		t.Errorf("after the term changed the registry holds %v, want the new term's counter at 0", families)
	}
}

// addRecorder is a manager that records what is added to it.
type addRecorder struct {
	manager.Manager
	added []manager.Runnable
}

func (m *addRecorder) Add(r manager.Runnable) error {
	m.added = append(m.added, r)
	return nil
}

// TestTrackingManagerAdd checks that the leader-only runnables reach the manager wrapped, still in
// the leader-election group and still able to warm up, and the others unchanged.
func TestTrackingManagerAdd(t *testing.T) {
	rec := &addRecorder{}
	m := trackingManager{Manager: rec, work: newLeaderWork(time.Second, clocktesting.NewFakeClock(time.Now())), gate: &readinessGate{}}
	for _, r := range []manager.Runnable{leaderRunnable(true), leaderRunnable(false), cacheRunnable{}, manager.RunnableFunc(func(context.Context) error { return nil })} {
		if err := m.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := rec.added[0].(*trackedWarmupRunnable); !ok {
		t.Errorf("a leader-only controller was added as %T, want it tracked with its Warmup", rec.added[0])
	}
	if rec.added[1] != leaderRunnable(false) || rec.added[2] != (cacheRunnable{}) {
		t.Errorf("runnables of every replica were changed: %T, %T", rec.added[1], rec.added[2])
	}
	tracked, ok := rec.added[3].(*trackedRunnable)
	if !ok || !tracked.NeedLeaderElection() {
		t.Errorf("a runnable that says nothing was added as %T, want it tracked in the leader-election group", rec.added[3])
	}
	if _, warms := rec.added[3].(warmupRunnable); warms {
		t.Error("a runnable without Warmup gained one")
	}
}
