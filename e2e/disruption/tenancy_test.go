package disruption_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/tenancy"
)

// TestConsolidationReplaceKeepsTenancy is the tenancy breach of the reliability issue: a Pod of a
// namespace bound to NodePool tenancy-own selects another tenant's NodePool, tenancy-b, and got past
// the Pod webhooks (its namespace carries the binding annotation but not the label their
// namespaceSelector matches, as during a webhook outage). The provisioner launches nothing for it and
// says why in an Event. Then consolidation replaces the two oversized nodes of NodePool tenancy-a: the
// pending Pod is in that simulation too, and before the fix the replace also launched a tenancy-b
// NodeClaim for it. Sampled from before the replace until it is over: no NodeClaim of tenancy-b
// ever exists and the Pod is never bound.
func TestConsolidationReplaceKeepsTenancy(t *testing.T) {
	const poolA, poolB, app, ns = "tenancy-a", "tenancy-b", "tenancy-app", "tenancy-bound"
	ctx := context.Background()
	consolidating := func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidateAfter = karpv1.NewNillableDuration(consolidateAfter)
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	}
	a := cluster.NodePool(t, poolA, framework.OnDemandC("16"), consolidating)
	cluster.NodePool(t, poolB, framework.OnDemandC("4"), consolidating)
	// Two 3-CPU pods that never share a node: two 16-vCPU nodes, mostly idle.
	cluster.Deployment(t, app, poolA, 2, "3", func(spec *corev1.PodSpec) {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}},
		}}
	})
	cluster.WaitRunning(t, app, 2, 2*time.Minute)
	oversized := framework.Live(cluster.NodeClaims(t, poolA))
	if len(oversized) != 2 {
		t.Fatalf("want two 16-vCPU nodes for two 3-CPU pods that avoid each other, got %d NodeClaims", len(oversized))
	}

	breach := createBreachPod(t, ns, poolB)
	noForeignClaim := framework.Sample(func(ctx context.Context) string {
		claims := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, claims, client.MatchingLabels{karpv1.NodePoolLabelKey: poolB}); err != nil {
			return ""
		}
		if len(claims.Items) > 0 {
			return fmt.Sprintf("NodeClaim %s of NodePool %s exists, which namespace %s is not bound to", claims.Items[0].Name, poolB, ns)
		}
		pod := &corev1.Pod{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(breach), pod); err == nil && pod.Spec.NodeName != "" {
			return fmt.Sprintf("the cross-tenant pod runs on node %s", pod.Spec.NodeName)
		}
		return ""
	})
	sampled := false
	finish := func() {
		if !sampled {
			sampled = true
			noForeignClaim.Finish(t, "no NodeClaim of "+poolB+" for namespace "+ns)
		}
	}
	t.Cleanup(finish) // also when a wait below fails
	if !cluster.HasEvent(t, breach.Name, tenancy.ReasonViolation, "no capacity is launched for this pod in NodePool "+poolB) {
		t.Fatalf("no %s Event on the cross-tenant pod", tenancy.ReasonViolation)
	}

	// Let the NodePool use 4-vCPU nodes: each oversized node is worth replacing.
	current := &karpv1.NodePool{}
	if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(a), current); err != nil {
		t.Fatal(err)
	}
	orig := current.DeepCopy()
	for i, r := range current.Spec.Template.Spec.Requirements {
		if r.Key == awsv1.LabelInstanceCPU {
			current.Spec.Template.Spec.Requirements[i].Values = []string{"4", "16"}
		}
	}
	if err := cluster.Client.Patch(ctx, current, client.MergeFrom(orig)); err != nil {
		t.Fatalf("allow 4-vCPU nodes: %v", err)
	}
	framework.Eventually(t, 3*time.Minute, "both oversized nodes of "+poolA+" to be replaced", func(ctx context.Context) (bool, error) {
		claims := cluster.NodeClaims(t, poolA)
		if len(claims) != 2 || framework.Disrupting(claims) != 0 {
			return false, nil
		}
		for _, nc := range claims {
			if nc.Name == oversized[0].Name || nc.Name == oversized[1].Name || !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
				return false, nil
			}
		}
		return true, nil
	})
	cluster.WaitRunning(t, app, 2, time.Minute)
	finish()
	if !cluster.HasEvent(t, oversized[0].Name, "DisruptionTerminating", "Underutilized") {
		t.Errorf("NodeClaim %s was not replaced by consolidation", oversized[0].Name)
	}
}

// createBreachPod creates the namespace ns, bound to NodePool tenancy-own by its annotation only, and
// in it a pending Pod selecting the NodePool pool; both are deleted when the test ends.
func createBreachPod(t *testing.T, ns, pool string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{tenancy.NodePoolsAnnotation: "tenancy-own"}}}
	if err := cluster.Client.Create(ctx, namespace); err != nil {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	t.Cleanup(func() {
		if err := cluster.Client.Delete(context.Background(), namespace); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", ns, err)
		}
	})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "breach", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: pool},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}},
		},
	}
	// The namespace's default ServiceAccount, which admission requires, comes a moment later.
	framework.Eventually(t, 30*time.Second, "the cross-tenant pod to be created", func(ctx context.Context) (bool, error) {
		err := cluster.Client.Create(ctx, pod)
		return err == nil || apierrors.IsAlreadyExists(err), nil
	})
	t.Cleanup(func() {
		if err := cluster.Client.Delete(context.Background(), pod); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete pod %s: %v", pod.Name, err)
		}
	})
	return pod
}
