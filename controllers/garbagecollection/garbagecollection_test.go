package garbagecollection_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/metricstest"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
	"github.com/joiner-dev/joiner/controllers/garbagecollection"
	"github.com/joiner-dev/joiner/controllers/termination"
	"github.com/joiner-dev/joiner/testbed"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// env is the control plane the package's tests share (apiserver only: the Nodes here never need
// to be Ready).
var env *nct.Env

func TestMain(m *testing.M) {
	os.Exit(nct.Main(m, &env, testbed.Options{}))
}

// harness is a collector under test, driven by RunOnce and a fake clock, next to a running
// termination controller that finishes what the collector starts.
type harness struct {
	gc    *garbagecollection.Controller
	cloud *fake.CloudProvider
	clock *clocktesting.FakeClock
	reg   *prometheus.Registry
	cache client.Client
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{cloud: fake.New(), clock: clocktesting.NewFakeClock(time.Now()), reg: prometheus.NewRegistry()}
	mgr := env.StartManager(t, func(mgr ctrl.Manager) error {
		term, err := termination.NewController(mgr.GetClient(), mgr.GetAPIReader(), h.cloud, nil,
			mgr.GetEventRecorder(termination.NodeClaimControllerName), nil, termination.Options{PollInterval: 200 * time.Millisecond})
		if err != nil {
			return err
		}
		if err := term.SetupWithManager(mgr); err != nil {
			return err
		}
		h.gc, err = garbagecollection.NewController(mgr.GetClient(), mgr.GetAPIReader(), h.cloud, h.clock,
			mgr.GetEventRecorder(garbagecollection.ControllerName), h.reg, garbagecollection.Options{GracePeriod: 30 * time.Second})
		if err != nil {
			return err
		}
		return fieldindex.Register(context.Background(), mgr.GetFieldIndexer())
	})
	h.cache = mgr.GetClient()
	return h
}

// instance launches an instance without a NodeClaim, created the given time ago (zero: the
// provider reports no creation time).
func (h *harness) instance(t *testing.T, age time.Duration) string {
	t.Helper()
	nc := nct.NodeClaim(nct.Name("lost"), "pool-a")
	if age > 0 {
		nc.CreationTimestamp = metav1.NewTime(h.clock.Now().Add(-age))
	}
	inst, err := h.cloud.Create(t.Context(), nc)
	if err != nil {
		t.Fatal(err)
	}
	return inst.Status.ProviderID
}

// nodeClaim creates a Launched NodeClaim with the provider ID, launched the given time ago, with
// the termination finalizer, and waits until the manager's cache has it.
func (h *harness) nodeClaim(t *testing.T, providerID string, launchedAgo time.Duration) *karpv1.NodeClaim {
	t.Helper()
	nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
	nc.Finalizers = []string{karpv1.TerminationFinalizer}
	if err := env.Client.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.ProviderID = providerID
	nc.Status.Conditions = []metav1.Condition{{
		Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched",
		LastTransitionTime: metav1.NewTime(h.clock.Now().Add(-launchedAgo)),
	}}
	if err := env.Client.Status().Update(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 10*time.Second, "cache sees the nodeclaim", func(ctx context.Context) error {
		cached := &karpv1.NodeClaim{}
		if err := h.cache.Get(ctx, client.ObjectKeyFromObject(nc), cached); err != nil {
			return err
		}
		if cached.Status.ProviderID != providerID {
			return errors.New("status not cached yet")
		}
		return nil
	})
	return nc
}

func (h *harness) runOnce(t *testing.T) {
	t.Helper()
	if err := h.gc.RunOnce(t.Context()); err != nil {
		t.Fatalf("garbage collection: %v", err)
	}
}

func (h *harness) exists(t *testing.T, providerID string) bool {
	t.Helper()
	_, err := h.cloud.Get(t.Context(), providerID)
	if err != nil && !cloudprovider.IsNodeClaimNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func TestOrphanedInstances(t *testing.T) {
	cases := []struct {
		name string
		age  time.Duration
		// claimed gives the instance a NodeClaim.
		claimed bool
		// wantAfterFirstRun and wantAfterGrace say whether the instance exists after a run now
		// and after a run once the grace period has passed.
		wantAfterFirstRun, wantAfterGrace bool
	}{
		{name: "an old instance without nodeclaim is terminated", age: time.Hour, wantAfterFirstRun: false, wantAfterGrace: false},
		{name: "a young instance without nodeclaim waits out the grace period", age: time.Second, wantAfterFirstRun: true, wantAfterGrace: false},
		{name: "an instance without creation time is timed from when it was first seen", age: 0, wantAfterFirstRun: true, wantAfterGrace: false},
		{name: "an instance with a nodeclaim stays", age: time.Hour, claimed: true, wantAfterFirstRun: true, wantAfterGrace: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			id := h.instance(t, tc.age)
			if tc.claimed {
				h.nodeClaim(t, id, time.Hour)
			}
			h.runOnce(t)
			if got := h.exists(t, id); got != tc.wantAfterFirstRun {
				t.Errorf("after the first run: instance exists = %v, want %v", got, tc.wantAfterFirstRun)
			}
			h.clock.Step(31 * time.Second)
			h.runOnce(t)
			if got := h.exists(t, id); got != tc.wantAfterGrace {
				t.Errorf("after the grace period: instance exists = %v, want %v", got, tc.wantAfterGrace)
			}
			want := 1.0
			if tc.wantAfterGrace {
				want = 0
			}
			if got := metricstest.Sum(t, h.reg, "joiner_garbage_collection_instances_terminated_total", nil); got != want {
				t.Errorf("instances terminated metric %v, want %v", got, want)
			}
		})
	}
}

func TestOrphanedInstanceWithNodeIsDrainedThroughTermination(t *testing.T) {
	h := newHarness(t)
	id := h.instance(t, time.Hour)
	node := nct.KwokNode(nct.Name("node"), id)
	if err := env.Client.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	h.runOnce(t)
	nct.Eventually(t, 20*time.Second, "node and instance gone", func(ctx context.Context) error {
		err := env.Gone(ctx, node)
		if h.exists(t, id) {
			err = errors.Join(err, fmt.Errorf("instance %s still exists", id))
		}
		return err
	})
	if err := env.HasEvent(t.Context(), node.Name, garbagecollection.ReasonOrphanedInstance, id); err != nil {
		t.Error(err)
	}
	// Termination, not the collector, terminated the instance: after the drain.
	if got := len(h.cloud.DeleteCalls()); got < 1 {
		t.Errorf("%d Delete calls", got)
	}
}

func TestNodeClaimsWhoseInstanceIsGone(t *testing.T) {
	cases := []struct {
		name        string
		launchedAgo time.Duration
		instance    bool
		wantDeleted bool
	}{
		{name: "a launched nodeclaim without instance is deleted", launchedAgo: time.Hour, wantDeleted: true},
		{name: "a fresh launch is given the grace period", launchedAgo: time.Second, wantDeleted: false},
		{name: "a nodeclaim whose instance exists stays", launchedAgo: time.Hour, instance: true, wantDeleted: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			id := "fake:///test-zone-1/vanished"
			if tc.instance {
				id = h.instance(t, time.Hour)
			}
			nc := h.nodeClaim(t, id, tc.launchedAgo)
			h.runOnce(t)
			if !tc.wantDeleted {
				nct.Consistently(t, time.Second, "nodeclaim stays", func(ctx context.Context) error {
					if err := env.Get(ctx, nc); err != nil {
						return err
					}
					if !nc.DeletionTimestamp.IsZero() {
						return errors.New("nodeclaim is being deleted")
					}
					return nil
				})
				return
			}
			nct.Eventually(t, 20*time.Second, "nodeclaim deleted and terminated", func(ctx context.Context) error {
				return errors.Join(env.Gone(ctx, nc), env.HasEvent(ctx, nc.Name, garbagecollection.ReasonInstanceNotFound, id))
			})
			if got := metricstest.Sum(t, h.reg, "karpenter_nodeclaims_disrupted_total", map[string]string{"reason": "garbage_collected", "nodepool": "pool-a"}); got != 1 {
				t.Errorf("nodeclaims deleted metric %v, want 1", got)
			}
		})
	}
}

func TestGarbageCollectionRunsOnItsInterval(t *testing.T) {
	cloud := fake.New()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		gc, err := garbagecollection.NewController(mgr.GetClient(), mgr.GetAPIReader(), cloud, nil,
			mgr.GetEventRecorder(garbagecollection.ControllerName), nil,
			garbagecollection.Options{Interval: 200 * time.Millisecond, GracePeriod: time.Millisecond})
		if err != nil {
			return err
		}
		return gc.SetupWithManager(mgr)
	})
	nc := nct.NodeClaim(nct.Name("lost"), "pool-a")
	nc.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Minute))
	inst, err := cloud.Create(t.Context(), nc)
	if err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 10*time.Second, "orphaned instance terminated", func(ctx context.Context) error {
		if _, err := cloud.Get(ctx, inst.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
			return fmt.Errorf("instance %s still exists (%v)", inst.Status.ProviderID, err)
		}
		return nil
	})
}

// startCollector runs a collector on a fake clock that never advances unless the test steps it,
// under a manager, with the termination controller (on the real clock) beside it.
func startCollector(t *testing.T, cloud *fake.CloudProvider, clk *clocktesting.FakeClock, opts garbagecollection.Options) {
	t.Helper()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		term, err := termination.NewController(mgr.GetClient(), mgr.GetAPIReader(), cloud, nil,
			mgr.GetEventRecorder(termination.NodeClaimControllerName), nil, termination.Options{PollInterval: 200 * time.Millisecond})
		if err != nil {
			return err
		}
		if err := term.SetupWithManager(mgr); err != nil {
			return err
		}
		gc, err := garbagecollection.NewController(mgr.GetClient(), mgr.GetAPIReader(), cloud, clk,
			mgr.GetEventRecorder(garbagecollection.ControllerName), prometheus.NewRegistry(), opts)
		if err != nil {
			return err
		}
		return gc.SetupWithManager(mgr)
	})
}

// TestGarbageCollectionRunsAtStart checks that a collector that just started (a restarted
// Joiner) collects at once what its predecessor left behind, with a clock that is never stepped:
// the first pass does not wait for the interval.
func TestGarbageCollectionRunsAtStart(t *testing.T) {
	cloud := fake.New()
	clk := clocktesting.NewFakeClock(time.Now())
	// What a crashed predecessor left: an instance nobody claims, and a Launched NodeClaim whose
	// instance is gone.
	lost := nct.NodeClaim(nct.Name("lost"), "pool-a")
	lost.CreationTimestamp = metav1.NewTime(clk.Now().Add(-time.Hour))
	orphan, err := cloud.Create(t.Context(), lost)
	if err != nil {
		t.Fatal(err)
	}
	nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
	nc.Finalizers = []string{karpv1.TerminationFinalizer}
	if err := env.Client.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	gone := "fake:///test-zone-1/gone-with-the-crash"
	nc.Status.ProviderID = gone
	nc.Status.Conditions = []metav1.Condition{{
		Type: karpv1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched",
		LastTransitionTime: metav1.NewTime(clk.Now().Add(-time.Hour)),
	}}
	if err := env.Client.Status().Update(t.Context(), nc); err != nil {
		t.Fatal(err)
	}

	startCollector(t, cloud, clk, garbagecollection.Options{})
	nct.Eventually(t, 20*time.Second, "the first pass collects both without the clock moving", func(ctx context.Context) error {
		var errs []error
		if _, err := cloud.Get(ctx, orphan.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
			errs = append(errs, fmt.Errorf("instance %s still exists (%v)", orphan.Status.ProviderID, err))
		}
		return errors.Join(append(errs, env.Gone(ctx, nc), env.HasEvent(ctx, nc.Name, garbagecollection.ReasonInstanceNotFound, gone))...)
	})
}

// TestGarbageCollectionComesBackWhenTheGracePeriodEnds checks that a pass that spared a young
// orphan is followed by one when its grace period ends, not a whole (here, hour-long) interval
// later.
func TestGarbageCollectionComesBackWhenTheGracePeriodEnds(t *testing.T) {
	cloud := fake.New()
	clk := clocktesting.NewFakeClock(time.Now())
	young := nct.NodeClaim(nct.Name("young"), "pool-a")
	young.CreationTimestamp = metav1.NewTime(clk.Now().Add(-5 * time.Second))
	inst, err := cloud.Create(t.Context(), young)
	if err != nil {
		t.Fatal(err)
	}
	startCollector(t, cloud, clk, garbagecollection.Options{Interval: time.Hour, GracePeriod: 30 * time.Second})
	waitForSleep := func() {
		t.Helper()
		nct.Eventually(t, 10*time.Second, "the collector sleeps", func(context.Context) error {
			if !clk.HasWaiters() {
				return errors.New("no waiter on the clock")
			}
			return nil
		})
	}
	exists := func() bool {
		_, err := cloud.Get(t.Context(), inst.Status.ProviderID)
		return err == nil
	}
	waitForSleep()
	if !exists() {
		t.Fatal("the first pass terminated an instance inside its grace period")
	}
	// 24s after the start the grace period (25s from then) has not ended: no pass.
	clk.Step(24 * time.Second)
	nct.Consistently(t, 500*time.Millisecond, "the instance stays inside its grace period", func(context.Context) error {
		if !exists() {
			return errors.New("instance terminated")
		}
		return nil
	})
	clk.Step(2 * time.Second)
	nct.Eventually(t, 10*time.Second, "the orphan terminated once its grace period ended", func(context.Context) error {
		if exists() {
			return fmt.Errorf("instance %s still exists", inst.Status.ProviderID)
		}
		return nil
	})
}
