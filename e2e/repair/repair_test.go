package repair_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/noderepair"
	"github.com/joiner-dev/joiner/controllers/termination"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/providers/local/localtest"
	"github.com/joiner-dev/joiner/testsupport/metricstest"
)

// pool creates a NodePool of on-demand 4-vCPU nodes (a 3-CPU pod fills one) that never
// consolidates and whose budget allows no voluntary disruption at all: only repair, which ignores
// budgets, may replace a node.
func pool(t *testing.T, name string) {
	t.Helper()
	cluster.NodePool(t, name, framework.OnDemandC("4"), func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.NeverDuration()
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
	})
}

// claimOf returns the name of the live NodeClaim of the pool whose Node is node.
func claimOf(t *testing.T, pool, node string) string {
	t.Helper()
	for _, nc := range framework.Live(cluster.NodeClaims(t, pool)) {
		if nc.Status.NodeName == node {
			return nc.Name
		}
	}
	t.Fatalf("no NodeClaim of %s has node %s", pool, node)
	return ""
}

// repaired returns karpenter_nodeclaims_disrupted_total{reason="unhealthy"} and
// karpenter_nodeclaims_unhealthy_disrupted_total{condition="ready"} of the pool.
func repaired(t *testing.T, pool string) (disrupted, unhealthy float64) {
	t.Helper()
	disrupted = metricstest.Sum(t, metrics, "karpenter_nodeclaims_disrupted_total", map[string]string{"reason": noderepair.DisruptedUnhealthy, "nodepool": pool})
	unhealthy = metricstest.Sum(t, metrics, "karpenter_nodeclaims_unhealthy_disrupted_total", map[string]string{"condition": "ready", "nodepool": pool})
	return disrupted, unhealthy
}

// TestUnhealthyNodeIsReplaced fails one node of three (Ready=Unknown, as a dead kubelet): its
// NodeClaim is deleted once the toleration ends, though the pool's budget is 0, with its
// termination deadline stamped to now; the node is drained (its pod deleted at that deadline) and
// removed, and the pod runs again on another node.
func TestUnhealthyNodeIsReplaced(t *testing.T) {
	t.Parallel()
	const name = "repair"
	pool(t, name)
	cluster.Deployment(t, name, name, 3, "3", nil)
	pods := cluster.WaitRunning(t, name, 3, 2*time.Minute)
	victim, node := pods[0].Name, pods[0].Spec.NodeName
	claim := claimOf(t, name, node)

	failedAt := time.Now()
	if err := localtest.FailNode(t.Context(), cluster.Client, node, corev1.ConditionUnknown, failedAt); err != nil {
		t.Fatal(err)
	}
	var deleting karpv1.NodeClaim
	framework.Eventually(t, toleration+time.Minute, "the failed node's NodeClaim to be deleted", func(ctx context.Context) (bool, error) {
		err := cluster.Client.Get(ctx, client.ObjectKey{Name: claim}, &deleting)
		if apierrors.IsNotFound(err) {
			return false, fmt.Errorf("NodeClaim %s went before it was seen being deleted", claim)
		}
		return err == nil && deleting.DeletionTimestamp != nil, nil
	})
	// Condition and deletion times have a resolution of a second.
	if waited := deleting.DeletionTimestamp.Sub(failedAt); waited < toleration-2*time.Second {
		t.Errorf("NodeClaim %s deleted %s after its node failed, before the toleration of %s", claim, waited, toleration)
	}
	if _, ok := deleting.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; !ok {
		t.Errorf("NodeClaim %s has no %s", claim, karpv1.NodeClaimTerminationTimestampAnnotationKey)
	}
	if c := deleting.StatusCondition(karpv1.ConditionTypeDisruptionReason); c == nil || c.Status != metav1.ConditionTrue || c.Reason != noderepair.ReasonUnhealthy {
		t.Errorf("NodeClaim %s DisruptionReason %v, want True/%s", claim, c, noderepair.ReasonUnhealthy)
	}
	if !cluster.HasEvent(t, node, noderepair.ReasonUnhealthy, "Ready=Unknown since") {
		t.Errorf("no %s event on node %s", noderepair.ReasonUnhealthy, node)
	}
	// Repair stamps the deadline to now, so the drain deletes the pods at once (as Karpenter's
	// repair does) rather than evicting them through their budgets.
	if !cluster.HasEvent(t, victim, termination.ReasonDeletedAtDeadline, "terminationGracePeriod of node "+node) {
		t.Errorf("pod %s of the failed node was not deleted by the drain at the stamped deadline", victim)
	}
	framework.Eventually(t, 2*time.Minute, "the failed node and its NodeClaim to be gone", func(ctx context.Context) (bool, error) {
		errNode := cluster.Client.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})
		errClaim := cluster.Client.Get(ctx, client.ObjectKey{Name: claim}, &karpv1.NodeClaim{})
		return apierrors.IsNotFound(errNode) && apierrors.IsNotFound(errClaim), nil
	})
	for _, p := range cluster.WaitRunning(t, name, 3, 2*time.Minute) {
		if p.Spec.NodeName == node {
			t.Errorf("pod %s still on the failed node %s", p.Name, node)
		}
	}
	t.Logf("node failed → NodeClaim deleted %s, → 3 pods Running elsewhere %s (toleration %s)",
		deleting.DeletionTimestamp.Sub(failedAt).Round(time.Second), time.Since(failedAt).Round(time.Second), toleration)
	if d, u := repaired(t, name); d != 1 || u != 1 {
		t.Errorf("disrupted_total{reason=unhealthy} = %v, unhealthy_disrupted_total{condition=ready} = %v, want 1 and 1", d, u)
	}
}

// TestRepairBlockedWhileMostNodesAreUnhealthy fails 3 of 5 nodes: more than 20% of the pool is
// unhealthy, so each failed node gets NodeRepairBlocked and no NodeClaim is deleted.
func TestRepairBlockedWhileMostNodesAreUnhealthy(t *testing.T) {
	t.Parallel()
	const name = "repair-blocked"
	pool(t, name)
	cluster.Deployment(t, name, name, 5, "3", nil)
	var failed []string
	for _, p := range cluster.WaitRunning(t, name, 5, 3*time.Minute) {
		if len(failed) < 3 {
			failed = append(failed, p.Spec.NodeName)
		}
	}
	now := time.Now()
	for _, node := range failed {
		if err := localtest.FailNode(t.Context(), cluster.Client, node, corev1.ConditionUnknown, now); err != nil {
			t.Fatal(err)
		}
	}
	for _, node := range failed {
		framework.Eventually(t, toleration+time.Minute, "NodeRepairBlocked on "+node, func(context.Context) (bool, error) {
			return cluster.HasEvent(t, node, noderepair.ReasonRepairBlocked, "more than 20% nodes are unhealthy in the nodepool (3 of 5"), nil
		})
	}
	framework.Hold(t, 15*time.Second, "no NodeClaim is repaired with 3 of 5 nodes unhealthy", func(context.Context) string {
		if n := len(cluster.NodeClaims(t, name)) - len(framework.Live(cluster.NodeClaims(t, name))); n > 0 {
			return fmt.Sprintf("%d NodeClaims of %s are being deleted", n, name)
		}
		return ""
	})
	if d, _ := repaired(t, name); d != 0 {
		t.Errorf("disrupted_total{reason=unhealthy} = %v while repair was blocked", d)
	}
}
