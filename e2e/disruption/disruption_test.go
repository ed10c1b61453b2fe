package disruption_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/e2e/framework"
)

// consolidateAfter of the test NodePools.
const consolidateAfter = 5 * time.Second

// pool creates a NodePool of on-demand, 4-vCPU c-family amd64 nodes (so a 1.5-CPU pod takes about
// half a node) that consolidates after consolidateAfter within a 100 % budget, then applies
// mutate.
func pool(t *testing.T, name string, mutate func(*karpv1.NodePool)) *karpv1.NodePool {
	t.Helper()
	return cluster.NodePool(t, name, framework.OnDemandC("4"), func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.NewNillableDuration(consolidateAfter)
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
		if mutate != nil {
			mutate(np)
		}
	})
}

// nodeNames returns the names of the NodeClaims' Nodes, sorted.
func nodeNames(claims []karpv1.NodeClaim) []string {
	var out []string
	for _, nc := range claims {
		out = append(out, nc.Status.NodeName)
	}
	slices.Sort(out)
	return out
}

func TestEmptyNodesGoAway(t *testing.T) {
	const name = "empty"
	pool(t, name, nil)
	cluster.Deployment(t, name, name, 6, "1500m", nil)
	cluster.WaitRunning(t, name, 6, 2*time.Minute)
	if n := len(framework.Live(cluster.NodeClaims(t, name))); n < 3 {
		t.Fatalf("6 pods of 1.5 CPU on 4-vCPU nodes should take at least 3 nodes, got %d", n)
	}
	cluster.Scale(t, name, 0)
	start := time.Now()
	framework.Eventually(t, consolidateAfter+30*time.Second, "every NodeClaim and Node of the pool to be gone", func(ctx context.Context) (bool, error) {
		if len(cluster.NodeClaims(t, name)) > 0 {
			return false, nil
		}
		nodes := &corev1.NodeList{}
		if err := cluster.Client.List(ctx, nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: name}); err != nil {
			return false, nil
		}
		return len(nodes.Items) == 0, nil
	})
	t.Logf("empty nodes gone %s after scaling to 0", time.Since(start).Round(100*time.Millisecond))
}

func TestUnderutilizedNodesAreRepackedWithinPDBs(t *testing.T) {
	const name, filler = "repack", "repack-filler"
	pool(t, name, nil)
	// Two 1.5-CPU pods fit on a 4-vCPU node: 10 + 10 pods take 10 nodes; without the fillers,
	// half of each node is idle and 5 nodes hold the 10 remaining pods.
	cluster.Deployment(t, name, name, 10, "1500m", nil)
	cluster.Deployment(t, filler, name, 10, "1500m", nil)
	cluster.WaitRunning(t, name, 10, 2*time.Minute)
	cluster.WaitRunning(t, filler, 10, 2*time.Minute)
	before := len(framework.Live(cluster.NodeClaims(t, name)))
	if before < 10 {
		t.Fatalf("20 pods of 1.5 CPU should take 10 nodes, got %d", before)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
	}
	if err := cluster.Client.Create(context.Background(), pdb); err != nil {
		t.Fatalf("create PDB: %v", err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), pdb) })
	// The PDB allows one pod of the app to be unavailable: sample that at most one is not
	// Running and Ready at any time while the nodes are repacked.
	held := framework.Sample(func(ctx context.Context) string {
		pods := &corev1.PodList{}
		if err := cluster.Client.List(ctx, pods, client.InNamespace("default"), client.MatchingLabels{"app": name}); err != nil {
			return ""
		}
		ready := 0
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && podReady(&p) {
				ready++
			}
		}
		if ready < 9 {
			return fmt.Sprintf("only %d of 10 pods of %s ready: the PDB (maxUnavailable 1) was violated", ready, name)
		}
		return ""
	})
	cluster.Scale(t, filler, 0)
	framework.Eventually(t, 4*time.Minute, "the pool to be repacked onto 5 nodes", func(ctx context.Context) (bool, error) {
		claims := cluster.NodeClaims(t, name)
		return len(claims) <= 5 && framework.Disrupting(claims) == 0, nil
	})
	held.Finish(t, "PodDisruptionBudget")
	cluster.WaitRunning(t, name, 10, time.Minute)
	t.Logf("repacked from %d to %d nodes", before, len(cluster.NodeClaims(t, name)))
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func TestBudgetOfOneNodeIsNeverExceeded(t *testing.T) {
	const name = "budget"
	pool(t, name, func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}} })
	cluster.Deployment(t, name, name, 6, "3", nil)
	cluster.WaitRunning(t, name, 6, 2*time.Minute)
	held := framework.Sample(func(ctx context.Context) string {
		list := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: name}); err != nil {
			return ""
		}
		if n := framework.Disrupting(list.Items); n > 1 {
			return fmt.Sprintf("%d nodes disrupting at once with a budget of 1", n)
		}
		return ""
	})
	cluster.Scale(t, name, 0)
	framework.Eventually(t, 3*time.Minute, "the pool's 6 empty nodes to be removed one at a time", func(ctx context.Context) (bool, error) {
		return len(cluster.NodeClaims(t, name)) == 0, nil
	})
	held.Finish(t, "budget nodes: 1")
}

func TestBudgetScheduleBlocksOnlyInsideItsWindow(t *testing.T) {
	const name = "window"
	// Active all day: nodes "0" from 00:00 UTC for 24h.
	np := pool(t, name, func(np *karpv1.NodePool) {
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr.To("0 0 * * *"), Duration: &metav1.Duration{Duration: 24 * time.Hour}}}
	})
	cluster.Deployment(t, name, name, 2, "3", nil)
	cluster.WaitRunning(t, name, 2, 2*time.Minute)
	cluster.Scale(t, name, 0)
	// Inside the window nothing may go: watch well past consolidateAfter and validation.
	deadline := time.Now().Add(consolidateAfter + validationDelay + 10*time.Second)
	for time.Now().Before(deadline) {
		claims := cluster.NodeClaims(t, name)
		if len(claims) != 2 || framework.Disrupting(claims) != 0 {
			t.Fatalf("a budget of 0 inside its window let nodes go: %d NodeClaims, %d disrupting", len(claims), framework.Disrupting(claims))
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Move the window to a time that is not now: the budget is inactive, so nothing limits.
	hour := (time.Now().UTC().Hour() + 12) % 24
	current := &karpv1.NodePool{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(np), current); err != nil {
		t.Fatal(err)
	}
	orig := current.DeepCopy()
	current.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr.To(fmt.Sprintf("0 %d * * *", hour)), Duration: &metav1.Duration{Duration: time.Hour}}}
	if err := cluster.Client.Patch(context.Background(), current, client.MergeFrom(orig)); err != nil {
		t.Fatalf("move the budget's window: %v", err)
	}
	framework.Eventually(t, time.Minute, "the empty nodes to go once the window is elsewhere", func(ctx context.Context) (bool, error) {
		return len(cluster.NodeClaims(t, name)) == 0, nil
	})
}

func TestDoNotDisruptKeepsNodes(t *testing.T) {
	const name = "dnd"
	pool(t, name, nil)
	// A protected pod and a plain one, each alone on a node at first (3 CPU each).
	cluster.Deployment(t, name+"-protected", name, 1, "3", nil)
	setPodAnnotation(t, name+"-protected", karpv1.DoNotDisruptAnnotationKey, "true")
	cluster.Deployment(t, name+"-plain", name, 2, "3", nil)
	protected := cluster.WaitRunning(t, name+"-protected", 1, 2*time.Minute)[0]
	cluster.WaitRunning(t, name+"-plain", 2, 2*time.Minute)
	// Protect one of the plain pods' nodes with the Node annotation.
	plainPods := cluster.Pods(t, name+"-plain")
	protectedNode := plainPods[0].Spec.NodeName
	otherNode := plainPods[1].Spec.NodeName
	node := &corev1.Node{}
	if err := cluster.Client.Get(context.Background(), types.NamespacedName{Name: protectedNode}, node); err != nil {
		t.Fatal(err)
	}
	orig := node.DeepCopy()
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[karpv1.DoNotDisruptAnnotationKey] = "true"
	if err := cluster.Client.Patch(context.Background(), node, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
	// Empty the plain pods' nodes: the unprotected one goes, the annotated one stays.
	cluster.Scale(t, name+"-plain", 0)
	framework.Eventually(t, time.Minute, "the unprotected empty node to go", func(ctx context.Context) (bool, error) {
		err := cluster.Client.Get(ctx, types.NamespacedName{Name: otherNode}, &corev1.Node{})
		return client.IgnoreNotFound(err) == nil && err != nil, nil
	})
	for _, n := range []string{protectedNode, protected.Spec.NodeName} {
		got := &corev1.Node{}
		if err := cluster.Client.Get(context.Background(), types.NamespacedName{Name: n}, got); err != nil {
			t.Fatalf("node %s protected by do-not-disrupt is gone: %v", n, err)
		}
		if got.DeletionTimestamp != nil || slices.ContainsFunc(got.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.DisruptedTaintKey }) {
			t.Fatalf("node %s protected by do-not-disrupt is being disrupted", n)
		}
	}
	pods := cluster.Pods(t, name+"-protected")
	if len(pods) != 1 || pods[0].UID != protected.UID {
		t.Fatalf("the do-not-disrupt pod was moved")
	}
	claim := nodeClaimOf(t, protectedNode)
	if !cluster.HasEvent(t, claim.Name, "DisruptionBlocked", "do-not-disrupt") {
		t.Errorf("no DisruptionBlocked event naming do-not-disrupt on NodeClaim %s", claim.Name)
	}
}

func setPodAnnotation(t *testing.T, deployment, key, value string) {
	t.Helper()
	d := &appsv1.Deployment{}
	ctx := context.Background()
	if err := cluster.Client.Get(ctx, types.NamespacedName{Namespace: "default", Name: deployment}, d); err != nil {
		t.Fatal(err)
	}
	orig := d.DeepCopy()
	if d.Spec.Template.Annotations == nil {
		d.Spec.Template.Annotations = map[string]string{}
	}
	d.Spec.Template.Annotations[key] = value
	if err := cluster.Client.Patch(ctx, d, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func nodeClaimOf(t *testing.T, node string) karpv1.NodeClaim {
	t.Helper()
	list := &karpv1.NodeClaimList{}
	if err := cluster.Client.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	for _, nc := range list.Items {
		if nc.Status.NodeName == node {
			return nc
		}
	}
	t.Fatalf("no NodeClaim for node %s", node)
	return karpv1.NodeClaim{}
}

// TestRestartInTheMiddleOfAReplace stops Joiner while a replace is under way and starts it again:
// the command is resumed or rolled back, no instance is left without a NodeClaim, no node keeps a
// stale taint, and the candidate goes only through a drain.
func TestRestartInTheMiddleOfAReplace(t *testing.T) {
	const name = "restart"
	np := cluster.NodePool(t, name, []karpv1.NodeSelectorRequirementWithMinValues{
		framework.Req(awsv1.LabelInstanceCategory, corev1.NodeSelectorOpIn, "c"),
		framework.Req(awsv1.LabelInstanceCPU, corev1.NodeSelectorOpIn, "16"),
		framework.Req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand),
		framework.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
	}, func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.NewNillableDuration(consolidateAfter)
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	})
	// Five 3-CPU pods on one 16-vCPU node; scaled to one, once the NodePool allows 4-vCPU nodes too,
	// the node is oversized and a 4-vCPU node replaces it.
	cluster.Deployment(t, name, name, 5, "3", nil)
	cluster.WaitRunning(t, name, 5, 2*time.Minute)
	big := framework.Live(cluster.NodeClaims(t, name))
	if len(big) != 1 {
		t.Fatalf("want one 16-vCPU node for five 3-CPU pods, got %d NodeClaims", len(big))
	}
	cluster.Scale(t, name, 1)
	current := &karpv1.NodePool{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(np), current); err != nil {
		t.Fatal(err)
	}
	orig := current.DeepCopy()
	for i, r := range current.Spec.Template.Spec.Requirements {
		if r.Key == awsv1.LabelInstanceCPU {
			current.Spec.Template.Spec.Requirements[i].Values = []string{"4", "16"}
		}
	}
	if err := cluster.Client.Patch(context.Background(), current, client.MergeFrom(orig)); err != nil {
		t.Fatalf("allow 4-vCPU nodes: %v", err)
	}
	// Restart once the replacement's Node has joined, before or while the candidate is drained.
	// (Restarting before the local provider registers the replacement's Node loses that instance,
	// which only garbage collection recovers: see the hardening issue.)
	framework.Eventually(t, time.Minute, "a replacement to register", func(ctx context.Context) (bool, error) {
		for _, nc := range cluster.NodeClaims(t, name) {
			if nc.Annotations[planner.ReplacementForAnnotationKey] != "" && nc.Status.NodeName != "" {
				return true, nil
			}
		}
		return false, nil
	})
	if err := cluster.RestartJoiner(context.Background()); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "the replace to finish: one small node, no command left", func(ctx context.Context) (bool, error) {
		claims := cluster.NodeClaims(t, name)
		if len(claims) != 1 || framework.Disrupting(claims) != 0 {
			return false, nil
		}
		return claims[0].Name != big[0].Name && meta.IsStatusConditionTrue(claims[0].Status.Conditions, karpv1.ConditionTypeInitialized), nil
	})
	cluster.WaitRunning(t, name, 1, time.Minute)
	// No stale taint on any node, and every node belongs to a NodeClaim.
	nodes := &corev1.NodeList{}
	if err := cluster.Client.List(context.Background(), nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: name}); err != nil {
		t.Fatal(err)
	}
	claims := cluster.NodeClaims(t, name)
	for _, n := range nodes.Items {
		if n.DeletionTimestamp != nil {
			continue
		}
		if !slices.Contains(nodeNames(claims), n.Name) {
			t.Errorf("node %s has no NodeClaim", n.Name)
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.DisruptedTaintKey }) {
			t.Errorf("node %s keeps the disrupted taint", n.Name)
		}
	}
	// The old node went through termination's drain.
	if !cluster.HasEvent(t, big[0].Name, "DisruptionTerminating", "Underutilized") {
		t.Errorf("the replaced NodeClaim %s was not disrupted through the queue", big[0].Name)
	}
}
