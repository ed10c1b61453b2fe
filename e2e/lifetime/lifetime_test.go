package lifetime_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
)

// pool creates a NodePool of on-demand 4-vCPU nodes (a 3-CPU pod fills one) that never
// consolidates, so that only the lifetime mechanism under test replaces nodes, then applies
// mutate.
func pool(t *testing.T, name string, mutate func(*karpv1.NodePool)) *karpv1.NodePool {
	t.Helper()
	return cluster.NodePool(t, name, framework.OnDemandC("4"), func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.NeverDuration()
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
		if mutate != nil {
			mutate(np)
		}
	})
}

func names(claims []karpv1.NodeClaim) []string {
	var out []string
	for _, nc := range claims {
		out = append(out, nc.Name)
	}
	return out
}

// replaced waits until none of the NodeClaims in old is left and want live, initialized
// NodeClaims hold the pool.
func replaced(t *testing.T, pool string, old []string, want int, timeout time.Duration) {
	t.Helper()
	framework.Eventually(t, timeout, fmt.Sprintf("every original NodeClaim of %s replaced", pool), func(ctx context.Context) (bool, error) {
		claims := cluster.NodeClaims(t, pool)
		ready := 0
		for _, nc := range claims {
			if slices.Contains(old, nc.Name) {
				return false, nil
			}
			if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
				ready++
			}
		}
		return ready == want && len(claims) == want, nil
	})
}

// atMostOneDisrupting samples that at most one NodeClaim of the pool is disrupted at a time, and
// that no candidate is deleted before its replacements are initialized.
func atMostOneDisrupting(pool string) *framework.Sampler {
	return framework.Sample(func(ctx context.Context) string {
		list := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
			return ""
		}
		if n := framework.Disrupting(list.Items); n > 1 {
			return fmt.Sprintf("%d NodeClaims disrupting at once with a budget of 1", n)
		}
		for _, cand := range list.Items {
			id := cand.Annotations[karpv1.DisruptionCommandAnnotationKey]
			if cand.DeletionTimestamp == nil || id == "" {
				continue
			}
			for _, r := range list.Items {
				if r.Annotations[karpv1.DisruptionReplacementForAnnotationKey] == id && !meta.IsStatusConditionTrue(r.Status.Conditions, karpv1.ConditionTypeInitialized) {
					return fmt.Sprintf("NodeClaim %s is being deleted before its replacement %s initialized", cand.Name, r.Name)
				}
			}
		}
		return ""
	})
}

func patchPool(t *testing.T, name string, mutate func(*karpv1.NodePool)) {
	t.Helper()
	np := &karpv1.NodePool{}
	ctx := context.Background()
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: name}, np); err != nil {
		t.Fatal(err)
	}
	orig := np.DeepCopy()
	mutate(np)
	if err := cluster.Client.Patch(ctx, np, client.MergeFrom(orig)); err != nil {
		t.Fatalf("patch NodePool %s: %v", name, err)
	}
}

func TestExpiryReplacesNodes(t *testing.T) {
	t.Parallel()
	const name = "expire"
	pool(t, name, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.ExpireAfter = karpv1.NewNillableDuration(2 * time.Minute)
	})
	cluster.Deployment(t, name, name, 2, "3", nil)
	cluster.WaitRunning(t, name, 2, 2*time.Minute)
	old := names(framework.Live(cluster.NodeClaims(t, name)))
	start := time.Now()
	replaced(t, name, old, 2, 4*time.Minute)
	cluster.WaitRunning(t, name, 2, 2*time.Minute)
	t.Logf("both nodes replaced %s after the pods ran (expireAfter 2m)", time.Since(start).Round(time.Second))
	if !cluster.HasEvent(t, old[0], "Expired", "expired") {
		t.Errorf("no Expired event on NodeClaim %s", old[0])
	}
}

func TestExpiryGoesAtTheTerminationGracePeriodDespiteAPDB(t *testing.T) {
	t.Parallel()
	const name = "expire-tgp"
	const expireAfter, tgp = time.Minute, 30 * time.Second
	pool(t, name, func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.ExpireAfter = karpv1.NewNillableDuration(expireAfter)
		np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: tgp}
	})
	cluster.Deployment(t, name, name, 1, "3", nil)
	pods := cluster.WaitRunning(t, name, 1, 2*time.Minute)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("100%")),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}},
	}
	if err := cluster.Client.Create(context.Background(), pdb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), pdb) })
	node := pods[0].Spec.NodeName
	var deletedAt time.Time
	framework.Eventually(t, 3*time.Minute, "the expired node to be deleted", func(ctx context.Context) (bool, error) {
		for _, nc := range cluster.NodeClaims(t, name) {
			if nc.Status.NodeName == node && nc.DeletionTimestamp != nil {
				deletedAt = nc.DeletionTimestamp.Time
				return true, nil
			}
		}
		return false, nil
	})
	framework.Eventually(t, tgp+time.Minute, "the node held by a 100% PDB to go at the terminationGracePeriod deadline", func(ctx context.Context) (bool, error) {
		err := cluster.Client.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})
		return apierrors.IsNotFound(err), nil
	})
	if held := time.Since(deletedAt); held < tgp-5*time.Second {
		t.Errorf("the PDB held the drain only %s, want about the terminationGracePeriod (%s)", held.Round(time.Second), tgp)
	}
}

func TestSoftExpiryStaysWithinABudgetOfOne(t *testing.T) {
	t.Parallel()
	const name = "soft-expire"
	pool(t, name, func(np *karpv1.NodePool) {
		np.Annotations = map[string]string{karpv1.ExpirationAnnotationKey: karpv1.ExpirationGraceful}
		np.Spec.Template.Spec.ExpireAfter = karpv1.NewNillableDuration(time.Minute)
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}}
	})
	cluster.Deployment(t, name, name, 5, "3", nil)
	cluster.WaitRunning(t, name, 5, 2*time.Minute)
	old := names(framework.Live(cluster.NodeClaims(t, name)))
	held := atMostOneDisrupting(name)
	replaced(t, name, old, 5, 6*time.Minute)
	held.Finish(t, "budget nodes: 1 during soft expiry")
	cluster.WaitRunning(t, name, 5, time.Minute)
}

func TestTemplateLabelDriftReplacesOneAtATime(t *testing.T) {
	t.Parallel()
	const name = "drift"
	pool(t, name, func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "1"}} })
	cluster.Deployment(t, name, name, 3, "3", nil)
	cluster.WaitRunning(t, name, 3, 2*time.Minute)
	old := names(framework.Live(cluster.NodeClaims(t, name)))
	// A change outside the template drifts nothing.
	patchPool(t, name, func(np *karpv1.NodePool) {
		np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: *resourceMust("100")}
	})
	framework.Hold(t, 10*time.Second, "changing limits drifts nothing", func(context.Context) string {
		for _, nc := range cluster.NodeClaims(t, name) {
			if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeDrifted) || nc.DeletionTimestamp != nil {
				return "changing limits drifted NodeClaim " + nc.Name
			}
		}
		return ""
	})
	held := atMostOneDisrupting(name)
	patchPool(t, name, func(np *karpv1.NodePool) {
		np.Spec.Template.Labels = map[string]string{"team": "blue"}
	})
	framework.Eventually(t, time.Minute, "a NodeClaim to be marked Drifted (NodePoolDrifted)", func(ctx context.Context) (bool, error) {
		for _, nc := range cluster.NodeClaims(t, name) {
			if c := meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDrifted); c != nil && c.Status == metav1.ConditionTrue && c.Reason == "NodePoolDrifted" {
				return true, nil
			}
			if nc.DeletionTimestamp != nil {
				return true, nil
			}
		}
		return false, nil
	})
	replaced(t, name, old, 3, 4*time.Minute)
	held.Finish(t, "budget nodes: 1 during drift")
	for _, nc := range cluster.NodeClaims(t, name) {
		if nc.Labels["team"] != "blue" {
			t.Errorf("replacement %s lacks the new template label", nc.Name)
		}
	}
}

func TestDoNotDisruptPodHoldsADriftedNode(t *testing.T) {
	t.Parallel()
	const name = "drift-dnd"
	pool(t, name, nil)
	cluster.Deployment(t, name, name, 1, "3", nil)
	pod := cluster.WaitRunning(t, name, 1, 2*time.Minute)[0]
	annotatePod(t, &pod, karpv1.DoNotDisruptAnnotationKey, "true")
	node := pod.Spec.NodeName
	patchPool(t, name, func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "green"} })
	framework.Eventually(t, time.Minute, "the node to be marked Drifted", func(ctx context.Context) (bool, error) {
		for _, nc := range cluster.NodeClaims(t, name) {
			if nc.Status.NodeName == node && meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeDrifted) {
				return true, nil
			}
		}
		return false, nil
	})
	framework.Hold(t, 15*time.Second, "do-not-disrupt holds the drifted node", func(context.Context) string {
		for _, nc := range cluster.NodeClaims(t, name) {
			if nc.Status.NodeName == node && (nc.DeletionTimestamp != nil || nc.Annotations[karpv1.DisruptionCommandAnnotationKey] != "") {
				return "the drifted node was disrupted while its pod has do-not-disrupt"
			}
		}
		return ""
	})
	annotatePod(t, &pod, karpv1.DoNotDisruptAnnotationKey, "")
	framework.Eventually(t, 2*time.Minute, "the drifted node to be replaced once do-not-disrupt is gone", func(ctx context.Context) (bool, error) {
		err := cluster.Client.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{})
		return apierrors.IsNotFound(err), nil
	})
	cluster.WaitRunning(t, name, 1, time.Minute)
}

func annotatePod(t *testing.T, pod *corev1.Pod, key, value string) {
	t.Helper()
	current := &corev1.Pod{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), current); err != nil {
		t.Fatal(err)
	}
	orig := current.DeepCopy()
	if current.Annotations == nil {
		current.Annotations = map[string]string{}
	}
	if value == "" {
		delete(current.Annotations, key)
	} else {
		current.Annotations[key] = value
	}
	if err := cluster.Client.Patch(context.Background(), current, client.MergeFrom(orig)); err != nil {
		t.Fatal(err)
	}
}

func TestDeletingANodePoolRemovesItsNodes(t *testing.T) {
	t.Parallel()
	const name = "delete-pool"
	np := pool(t, name, nil)
	cluster.Deployment(t, name, name, 2, "3", nil)
	cluster.WaitRunning(t, name, 2, 2*time.Minute)
	for _, nc := range cluster.NodeClaims(t, name) {
		if len(nc.OwnerReferences) != 1 || nc.OwnerReferences[0].Kind != "NodePool" || nc.OwnerReferences[0].UID != np.UID {
			t.Fatalf("NodeClaim %s is not owned by its NodePool: %+v", nc.Name, nc.OwnerReferences)
		}
	}
	if err := cluster.Client.Delete(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, 2*time.Minute, "every NodeClaim and Node of the deleted NodePool to be gone", func(ctx context.Context) (bool, error) {
		if len(cluster.NodeClaims(t, name)) > 0 {
			return false, nil
		}
		nodes := &corev1.NodeList{}
		if err := cluster.Client.List(ctx, nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: name}); err != nil {
			return false, nil
		}
		return len(nodes.Items) == 0, nil
	})
}

func TestStaticNodePool(t *testing.T) {
	t.Parallel()
	const name = "static"
	pool(t, name, func(np *karpv1.NodePool) { np.Spec.Replicas = ptr.To[int64](3) })
	ready := func(want int) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			n := 0
			claims := cluster.NodeClaims(t, name)
			for _, nc := range claims {
				if meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
					n++
				}
			}
			return n == want && len(claims) == want, nil
		}
	}
	framework.Eventually(t, 2*time.Minute, "three Ready nodes", ready(3))
	patchPool(t, name, func(np *karpv1.NodePool) { np.Spec.Replicas = ptr.To[int64](1) })
	framework.Eventually(t, 2*time.Minute, "scaling to one to remove two", ready(1))
	// A pending pod that needs this NodePool must not make it grow.
	cluster.Deployment(t, name, name, 3, "3", nil)
	framework.Hold(t, 15*time.Second, "no pending pod grows the static NodePool", func(context.Context) string {
		if n := len(cluster.NodeClaims(t, name)); n > 1 {
			return fmt.Sprintf("a pending pod landed a node in the static NodePool: %d NodeClaims", n)
		}
		return ""
	})
}

func resourceMust(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}
