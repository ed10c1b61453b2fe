package consolidatable_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/consolidatable"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// start is where the tests' fake clocks begin. It is a whole second because the API server
// stores condition and pod event times with second precision.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func startController(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return consolidatable.NewController(mgr.GetClient(), clk, consolidatable.Options{}).SetupWithManager(mgr)
	})
}

// createNodePool creates a NodePool with the consolidateAfter ("30s", "Never"); replicas makes
// it static.
func createNodePool(t *testing.T, consolidateAfter string, replicas *int64) *karpv1.NodePool {
	t.Helper()
	after, err := karpv1.ParseNillableDuration(consolidateAfter)
	if err != nil {
		t.Fatal(err)
	}
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: nct.Name("pool")},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.ArchitectureAmd64}}},
				NodeClassRef: &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: "LocalNodeClass", Name: "default"},
			}},
			Disruption: karpv1.Disruption{ConsolidateAfter: after},
			Replicas:   replicas,
		},
	}
	if err := env.Client.Create(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	return np
}

// nodeClaimState is the status a test gives a NodeClaim.
type nodeClaimState struct {
	// initializedAt is when it became Initialized; nil leaves it Initialized=Unknown.
	initializedAt *time.Time
	// lastPodEvent is its status.lastPodEventTime (zero: unset).
	lastPodEvent time.Time
	// consolidatable seeds a stale Consolidatable=True condition, so that its removal shows that
	// the controller has judged the NodeClaim.
	consolidatable bool
}

// createNodeClaim creates a NodeClaim of the pool (empty: without the nodepool label) and writes
// the state into its status, as the lifecycle and pod events controllers would.
func createNodeClaim(t *testing.T, pool string, state nodeClaimState) *karpv1.NodeClaim {
	t.Helper()
	nc := nct.NodeClaim(nct.Name("nc"), pool)
	if pool == "" {
		delete(nc.Labels, karpv1.NodePoolLabelKey)
	}
	if err := env.Client.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	stored := nc.DeepCopy()
	if state.initializedAt != nil {
		nc.SetCondition(*state.initializedAt, karpv1.ConditionTypeInitialized, metav1.ConditionTrue, "Initialized", "")
	} else {
		nc.SetCondition(start, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, "NotInitialized", "node is not ready")
	}
	nc.Status.LastPodEventTime = metav1.NewTime(state.lastPodEvent)
	if state.consolidatable {
		nc.SetCondition(start.Add(-time.Hour), karpv1.ConditionTypeConsolidatable, metav1.ConditionTrue, consolidatable.ReasonConsolidatable, "")
	}
	patchStatus(t, stored, nc)
	return nc
}

// patchStatus writes nc's status (a merge patch from stored, as another controller would).
func patchStatus(t *testing.T, stored, nc *karpv1.NodeClaim) {
	t.Helper()
	if err := env.Client.Status().Patch(t.Context(), nc, client.MergeFrom(stored)); err != nil {
		t.Fatalf("patch status of nodeclaim %s: %v", nc.Name, err)
	}
}

// isConsolidatable returns nil when the NodeClaim's Consolidatable condition is True (want) or
// absent (!want).
func isConsolidatable(ctx context.Context, nc *karpv1.NodeClaim, want bool) error {
	if err := env.Get(ctx, nc); err != nil {
		return err
	}
	if want {
		return nct.Condition(nc, karpv1.ConditionTypeConsolidatable, metav1.ConditionTrue, consolidatable.ReasonConsolidatable)
	}
	if c := nc.StatusCondition(karpv1.ConditionTypeConsolidatable); c != nil {
		return fmt.Errorf("nodeclaim %s has condition %s=%s, want none", nc.Name, c.Type, c.Status)
	}
	return nil
}

func waitConsolidatable(t *testing.T, nc *karpv1.NodeClaim, want bool, what string) {
	t.Helper()
	nct.Eventually(t, 10*time.Second, what, func(ctx context.Context) error { return isConsolidatable(ctx, nc, want) })
}

func ago(d time.Duration) *time.Time { return ptr.To(start.Add(-d)) }

func TestConsolidatableCondition(t *testing.T) {
	cases := []struct {
		name             string
		consolidateAfter string
		// static sets spec.replicas on the NodePool.
		static bool
		// pool: "" uses the case's NodePool, "none" leaves the NodeClaim without the nodepool
		// label, anything else names a NodePool that does not exist.
		pool  string
		state nodeClaimState
		want  bool
	}{
		{name: "not initialized", consolidateAfter: "0s"},
		{name: "0s: as soon as initialized", consolidateAfter: "0s", state: nodeClaimState{initializedAt: ago(0)}, want: true},
		{name: "30s not yet passed since initialization", consolidateAfter: "30s", state: nodeClaimState{initializedAt: ago(10 * time.Second)}},
		{name: "30s passed since initialization", consolidateAfter: "30s", state: nodeClaimState{initializedAt: ago(31 * time.Second)}, want: true},
		{name: "exactly 30s since initialization", consolidateAfter: "30s", state: nodeClaimState{initializedAt: ago(30 * time.Second)}, want: true},
		{
			name: "a recent pod event restarts the wait", consolidateAfter: "30s",
			state: nodeClaimState{initializedAt: ago(time.Hour), lastPodEvent: *ago(10 * time.Second)},
		},
		{
			name: "30s passed since the last pod event", consolidateAfter: "30s",
			state: nodeClaimState{initializedAt: ago(time.Hour), lastPodEvent: *ago(30 * time.Second)}, want: true,
		},
		{
			// As in Karpenter, a recorded pod event replaces the initialization time.
			name: "the last pod event counts even when older than initialization", consolidateAfter: "30s",
			state: nodeClaimState{initializedAt: ago(10 * time.Second), lastPodEvent: *ago(time.Hour)}, want: true,
		},
		{name: "consolidateAfter Never", consolidateAfter: "Never", state: nodeClaimState{initializedAt: ago(time.Hour)}},
		{name: "static NodePool", consolidateAfter: "0s", static: true, state: nodeClaimState{initializedAt: ago(time.Hour)}},
		{name: "no nodepool label", consolidateAfter: "0s", pool: "none", state: nodeClaimState{initializedAt: ago(time.Hour)}},
		{name: "NodePool gone", consolidateAfter: "0s", pool: "missing-pool", state: nodeClaimState{initializedAt: ago(time.Hour)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			startController(t, clocktesting.NewFakeClock(start))
			var replicas *int64
			if tc.static {
				replicas = ptr.To[int64](1)
			}
			pool := createNodePool(t, tc.consolidateAfter, replicas).Name
			switch tc.pool {
			case "":
			case "none":
				pool = ""
			default:
				pool = tc.pool
			}
			// A case that expects no condition starts with a stale one, so that its removal shows
			// that the controller has looked at the NodeClaim.
			tc.state.consolidatable = !tc.want
			nc := createNodeClaim(t, pool, tc.state)
			waitConsolidatable(t, nc, tc.want, "consolidatable condition")
		})
	}
}

// TestConsolidatableOnceConsolidateAfterPasses steps the fake clock past t0+consolidateAfter.
// The controller asks to look again when consolidateAfter will have passed, but controller-runtime
// waits for that RequeueAfter in real time, not on the injected clock. So the first case puts t0
// 29s in the past, making the RequeueAfter 1s: while the fake clock stands still every requeue
// asks for another second, and the first requeue after the clock is stepped sets the condition,
// with no event on the NodeClaim. The second case waits the full 30s, whose requeue lies beyond
// the test, and shows that any later event on the NodeClaim picks the new time up.
func TestConsolidatableOnceConsolidateAfterPasses(t *testing.T) {
	cases := []struct {
		name        string
		initialized time.Time
		// touch updates the NodeClaim after the clock is stepped.
		touch bool
	}{
		{name: "by requeue", initialized: *ago(29 * time.Second)},
		{name: "on the next event", initialized: start, touch: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(start)
			startController(t, clk)
			pool := createNodePool(t, "30s", nil)
			nc := createNodeClaim(t, pool.Name, nodeClaimState{initializedAt: &tc.initialized, consolidatable: true})
			waitConsolidatable(t, nc, false, "not consolidatable before consolidateAfter passes")

			clk.SetTime(tc.initialized.Add(30*time.Second + time.Second))
			if tc.touch {
				stored := nc.DeepCopy()
				nc.Annotations = map[string]string{"example.com/touched": "true"}
				if err := env.Client.Patch(t.Context(), nc, client.MergeFrom(stored)); err != nil {
					t.Fatal(err)
				}
			}
			waitConsolidatable(t, nc, true, "consolidatable once consolidateAfter passed")
		})
	}
}

func TestPodEventResetsConsolidatable(t *testing.T) {
	clk := clocktesting.NewFakeClock(start)
	startController(t, clk)
	pool := createNodePool(t, "30s", nil)
	nc := createNodeClaim(t, pool.Name, nodeClaimState{initializedAt: ago(time.Hour)})
	waitConsolidatable(t, nc, true, "consolidatable an hour after initialization")

	// Nothing changes, so nothing is written: the controller's own write does not loop.
	version := nc.ResourceVersion
	nct.Consistently(t, time.Second, "no further writes", func(ctx context.Context) error {
		if err := env.Get(ctx, nc); err != nil {
			return err
		}
		if nc.ResourceVersion != version {
			return fmt.Errorf("nodeclaim written again: resource version %s, was %s", nc.ResourceVersion, version)
		}
		return nil
	})

	// A pod event 29s ago: not consolidatable for another second of the fake clock (see
	// TestConsolidatableOnceConsolidateAfterPasses for why 29s).
	stored := nc.DeepCopy()
	nc.Status.LastPodEventTime = metav1.NewTime(start.Add(-29 * time.Second))
	patchStatus(t, stored, nc)
	waitConsolidatable(t, nc, false, "a pod event removes the condition")
	clk.Step(2 * time.Second)
	waitConsolidatable(t, nc, true, "consolidatable again 30s after the pod event")
}

func TestNodePoolChangesReachItsNodeClaims(t *testing.T) {
	startController(t, clocktesting.NewFakeClock(start))
	pool := createNodePool(t, "0s", nil)
	nc := createNodeClaim(t, pool.Name, nodeClaimState{initializedAt: ago(time.Hour)})
	other := createNodeClaim(t, pool.Name, nodeClaimState{initializedAt: ago(time.Minute)})
	waitConsolidatable(t, nc, true, "consolidatable with consolidateAfter 0s")
	waitConsolidatable(t, other, true, "consolidatable with consolidateAfter 0s")

	setConsolidateAfter := func(value string) {
		t.Helper()
		after, err := karpv1.ParseNillableDuration(value)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.Get(t.Context(), pool); err != nil {
			t.Fatal(err)
		}
		pool.Spec.Disruption.ConsolidateAfter = after
		if err := env.Client.Update(t.Context(), pool); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name              string
		act               func()
		wantNC, wantOther bool
	}{
		{name: "consolidation disabled", act: func() { setConsolidateAfter("Never") }},
		{name: "consolidateAfter 10m", act: func() { setConsolidateAfter("10m") }, wantNC: true},
		{name: "nodepool deleted", act: func() {
			if err := env.Client.Delete(t.Context(), pool); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, step := range steps {
		step.act()
		nct.Eventually(t, 10*time.Second, step.name, func(ctx context.Context) error {
			return errors.Join(isConsolidatable(ctx, nc, step.wantNC), isConsolidatable(ctx, other, step.wantOther))
		})
	}
}
