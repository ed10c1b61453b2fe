package noderepair_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/noderepair"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
	"github.com/joiner-dev/joiner/testsupport/metricstest"
)

// The tests set Node conditions themselves (nothing else writes them on this control plane) with
// lastTransitionTime t0, and put the fake clock where the case needs it relative to t0. The
// controller asks to look again when a toleration ends, but controller-runtime waits for a
// RequeueAfter in real time: a test that steps the clock starts one second short of the end, so
// that the controller keeps looking every second until the clock is stepped.

// keepFinalizer keeps a deleted NodeClaim around (no termination controller runs here) so that the
// test can read what repair wrote on it.
const keepFinalizer = "test.joiner.dev/keep"

const toleration = 30 * time.Minute

// startController runs node repair with the Ready policies on the fake clock and returns the
// registry of its metrics.
func startController(t *testing.T, clk *clocktesting.FakeClock) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		c, err := noderepair.NewController(mgr.GetClient(), fake.New(), clk, mgr.GetEventRecorder(noderepair.ControllerName), reg, noderepair.Options{})
		if err != nil {
			return err
		}
		return c.SetupWithManager(mgr)
	})
	return reg
}

// machine is a Node, and the NodeClaim that owns it unless the Node is unmanaged.
type machine struct {
	node *corev1.Node
	nc   *karpv1.NodeClaim
}

// create makes a Node whose Ready condition has status since t0, labelled with the pool (none
// when pool is ""), and, when managed, its on-demand NodeClaim of the pool.
func create(t *testing.T, pool string, managed bool, status corev1.ConditionStatus, t0 time.Time, annotations map[string]string) machine {
	t.Helper()
	ctx := t.Context()
	name := nct.Name("node")
	providerID := "fake:///" + name
	node := nct.KwokNode(name, providerID)
	delete(node.Annotations, "kwok.x-k8s.io/node") // no kwok runs; the test owns the conditions
	for k, v := range annotations {
		node.Annotations[k] = v
	}
	if pool != "" {
		node.Labels[karpv1.NodePoolLabelKey] = pool
	}
	if err := env.Client.Create(ctx, node); err != nil {
		t.Fatal(err)
	}
	setReady(t, node, status, t0)
	m := machine{node: node}
	if !managed {
		return m
	}
	nc := nct.NodeClaim(nct.Name("nc"), pool)
	if pool == "" {
		delete(nc.Labels, karpv1.NodePoolLabelKey)
	}
	nc.Labels[karpv1.CapacityTypeLabelKey] = karpv1.CapacityTypeOnDemand
	nc.Finalizers = []string{keepFinalizer}
	if err := env.Client.Create(ctx, nc); err != nil {
		t.Fatal(err)
	}
	stored := nc.DeepCopy()
	nc.Status.ProviderID, nc.Status.NodeName, nc.Status.ImageID = providerID, name, "image-1"
	if err := env.Client.Status().Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		t.Fatal(err)
	}
	m.nc = nc
	return m
}

// setReady sets the Node's Ready condition to status, transitioned at since.
func setReady(t *testing.T, node *corev1.Node, status corev1.ConditionStatus, since time.Time) {
	t.Helper()
	if err := env.Get(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "Test",
		LastHeartbeatTime: metav1.NewTime(since), LastTransitionTime: metav1.NewTime(since)}}
	if err := env.Client.Status().Update(t.Context(), node); err != nil {
		t.Fatalf("set Ready=%s on node %s: %v", status, node.Name, err)
	}
}

// deleting returns nil once the NodeClaim is being deleted.
func deleting(ctx context.Context, nc *karpv1.NodeClaim) error {
	got := nc.DeepCopy()
	if err := env.Get(ctx, got); err != nil {
		return err
	}
	if got.DeletionTimestamp.IsZero() {
		return fmt.Errorf("nodeclaim %s is not being deleted", nc.Name)
	}
	return nil
}

// kept fails the test when a NodeClaim of ms is being deleted.
func kept(ms ...machine) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		var errs []error
		for _, m := range ms {
			if m.nc != nil && deleting(ctx, m.nc) == nil {
				errs = append(errs, fmt.Errorf("nodeclaim %s of node %s was deleted", m.nc.Name, m.node.Name))
			}
		}
		return errors.Join(errs...)
	}
}

func repairedCount(t *testing.T, reg *prometheus.Registry, pool string) (disrupted, unhealthy float64) {
	t.Helper()
	disrupted = metricstest.Sum(t, reg, "karpenter_nodeclaims_disrupted_total",
		map[string]string{"reason": noderepair.DisruptedUnhealthy, "nodepool": pool, "capacity_type": karpv1.CapacityTypeOnDemand})
	unhealthy = metricstest.Sum(t, reg, "karpenter_nodeclaims_unhealthy_disrupted_total",
		map[string]string{"condition": "ready", "nodepool": pool, "capacity_type": karpv1.CapacityTypeOnDemand, "image_id": "image-1"})
	return disrupted, unhealthy
}

// TestRepairsAfterTheToleration: a Node of a pool of three goes Unknown; its NodeClaim is kept
// until the toleration ends, then deleted although the Node says do-not-disrupt, with the deadline
// stamped to now, the DisruptionReason condition, Events and metrics. Unhealthy Nodes of another
// pool do not count against this pool.
func TestRepairsAfterTheToleration(t *testing.T) {
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	pool := nct.Name("pool")
	sick := create(t, pool, true, corev1.ConditionUnknown, t0, map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"})
	healthy := []machine{create(t, pool, true, corev1.ConditionTrue, t0, nil), create(t, pool, true, corev1.ConditionTrue, t0, nil)}
	other := nct.Name("other")
	for range 3 {
		create(t, other, false, corev1.ConditionFalse, t0, nil)
	}
	clk := clocktesting.NewFakeClock(t0.Add(toleration - time.Second))
	reg := startController(t, clk)

	nct.Consistently(t, 3*time.Second, "the NodeClaim is kept within the toleration", kept(sick))
	clk.Step(2 * time.Second)
	nct.Eventually(t, 10*time.Second, "the NodeClaim is deleted once the toleration ends", func(ctx context.Context) error { return deleting(ctx, sick.nc) })

	nc := sick.nc.DeepCopy()
	if err := env.Get(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	if got, want := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey], clk.Now().UTC().Format(time.RFC3339); got != want {
		t.Errorf("termination timestamp %q, want now %q", got, want)
	}
	if err := nct.Condition(nc, karpv1.ConditionTypeDisruptionReason, metav1.ConditionTrue, noderepair.ReasonUnhealthy); err != nil {
		t.Error(err)
	}
	for _, regarding := range []string{sick.node.Name, sick.nc.Name} {
		nct.Eventually(t, 10*time.Second, "the Unhealthy event on "+regarding, func(ctx context.Context) error {
			return env.HasEvent(ctx, regarding, noderepair.ReasonUnhealthy, "Ready=Unknown since")
		})
	}
	if d, u := repairedCount(t, reg, pool); d != 1 || u != 1 {
		t.Errorf("disrupted{unhealthy} = %v, unhealthy_disrupted{ready} = %v, want 1 and 1", d, u)
	}
	nct.Consistently(t, 2*time.Second, "the healthy NodeClaims are kept", kept(healthy...))
}

// TestTwentyPercentRule: with 3 of 5 Nodes unhealthy past the toleration nothing is repaired and
// each unhealthy Node gets NodeRepairBlocked; once two recover, the third is repaired. A
// NodeClaim without a NodePool is measured against the whole cluster.
func TestTwentyPercentRule(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	tests := []struct {
		name  string
		pool  string
		scope string
	}{
		{name: "nodepool", pool: nct.Name("pool"), scope: "nodepool"},
		{name: "cluster for a NodeClaim without a NodePool", scope: "cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var sick []machine
			for range 3 {
				sick = append(sick, create(t, tt.pool, true, corev1.ConditionUnknown, t0, nil))
			}
			create(t, tt.pool, true, corev1.ConditionTrue, t0, nil)
			create(t, tt.pool, false, corev1.ConditionTrue, t0, nil)
			reg := startController(t, clocktesting.NewFakeClock(t0.Add(toleration+time.Minute)))

			for _, m := range sick {
				nct.Eventually(t, 10*time.Second, "NodeRepairBlocked on "+m.node.Name, func(ctx context.Context) error {
					return env.HasEvent(ctx, m.node.Name, noderepair.ReasonRepairBlocked, "more than 20% nodes are unhealthy in the "+tt.scope+" (3 of 5")
				})
			}
			nct.Consistently(t, 2*time.Second, "no NodeClaim is repaired with 3 of 5 unhealthy", kept(sick...))
			if d, _ := repairedCount(t, reg, tt.pool); d != 0 {
				t.Errorf("disrupted{unhealthy} = %v while blocked", d)
			}

			// Two recover; the third (whose condition the test touches, as the 5-minute retry is
			// real time) is now 1 of 5 and is repaired.
			setReady(t, sick[0].node, corev1.ConditionTrue, t0)
			setReady(t, sick[1].node, corev1.ConditionTrue, t0)
			setReady(t, sick[2].node, corev1.ConditionUnknown, t0.Add(time.Second))
			nct.Eventually(t, 10*time.Second, "the last unhealthy NodeClaim is repaired", func(ctx context.Context) error { return deleting(ctx, sick[2].nc) })
			nct.Consistently(t, time.Second, "the recovered NodeClaims are kept", kept(sick[0], sick[1]))
		})
	}
}

// TestLeavesAlone: a Ready Node, an unhealthy Node without a NodeClaim, and an unhealthy Node
// whose NodeClaim is already being deleted are not repaired.
func TestLeavesAlone(t *testing.T) {
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	pool := nct.Name("pool")
	ready := create(t, pool, true, corev1.ConditionTrue, t0, nil)
	create(t, pool, false, corev1.ConditionFalse, t0, nil)
	going := create(t, "", true, corev1.ConditionFalse, t0, nil)
	if err := env.Client.Delete(t.Context(), going.nc); err != nil {
		t.Fatal(err)
	}
	for range 7 { // keeps the pool-less NodeClaim within the cluster's 20%
		create(t, "", false, corev1.ConditionTrue, t0, nil)
	}
	reg := startController(t, clocktesting.NewFakeClock(t0.Add(toleration+time.Minute)))
	nct.Consistently(t, 3*time.Second, "the Ready node's NodeClaim is kept", kept(ready))
	if err := env.Get(t.Context(), going.nc); err != nil {
		t.Fatal(err)
	}
	if _, stamped := going.nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; stamped {
		t.Error("repair stamped a NodeClaim that was already being deleted")
	}
	if d, _ := repairedCount(t, reg, ""); d != 0 {
		t.Errorf("disrupted{unhealthy} = %v, want 0", d)
	}
}

// TestNewControllerRejectsProvidersWithoutRepair: a provider without policies, or with a broken
// one, is an error naming the problem.
func TestNewControllerRejectsProvidersWithoutRepair(t *testing.T) {
	tests := []struct {
		name    string
		repair  []cloudprovider.RepairPolicy
		opts    noderepair.Options
		wantErr string
	}{
		{name: "no policies", repair: []cloudprovider.RepairPolicy{}, wantErr: "has no repair policies"},
		{name: "empty status", repair: []cloudprovider.RepairPolicy{{ConditionType: corev1.NodeReady}}, wantErr: "conditionStatus is empty"},
		{name: "negative override", opts: noderepair.Options{Toleration: -time.Second}, wantErr: "toleration -1s is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := fake.New()
			cp.Repair = tt.repair
			_, err := noderepair.NewController(env.Client, cp, nil, nil, nil, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("NewController: %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
