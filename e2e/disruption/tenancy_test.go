package disruption_test

import (
	"context"
	"fmt"
	"slices"
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
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/controllers/expiration"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/tenancy"
)

// tenancyExpireAfter is the expireAfter of the expiry cases: long enough for their pods to run
// first, short enough to keep each case well under a minute.
const tenancyExpireAfter = 20 * time.Second

// replacementCase is one way the nodes of a NodePool get replaced while the cross-tenant pod is
// pending.
type replacementCase struct {
	name string
	// cpus are the vCPU counts the NodePool allows when its two pods come.
	cpus []string
	// pool sets the NodePool's disruption and lifetime.
	pool func(*karpv1.NodePool)
	// disrupt starts the replacement once the pods run; nil when time alone does (expiry).
	disrupt func(t *testing.T, pool string)
	// trigger says what started the replacement, for the log.
	trigger string
	// reason and text are the reason and a part of the message of the Event each replaced
	// NodeClaim gets, which names the path it went through.
	reason, text string
}

func replacementCases() []replacementCase {
	lifetimeOnly := func(mutate func(*karpv1.NodePool)) func(*karpv1.NodePool) {
		return func(np *karpv1.NodePool) {
			np.Spec.Disruption.ConsolidateAfter = karpv1.NeverDuration()
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
			mutate(np)
		}
	}
	return []replacementCase{{
		// Two mostly idle 16-vCPU nodes; allowing 4-vCPU nodes makes each worth replacing.
		name: "consolidation", cpus: []string{"16"},
		pool: func(np *karpv1.NodePool) {
			np.Spec.Disruption.ConsolidateAfter = karpv1.NewNillableDuration(consolidateAfter)
			np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
		},
		disrupt: func(t *testing.T, pool string) {
			patchNodePool(t, pool, func(np *karpv1.NodePool) {
				for i, r := range np.Spec.Template.Spec.Requirements {
					if r.Key == awsv1.LabelInstanceCPU {
						np.Spec.Template.Spec.Requirements[i].Values = []string{"4", "16"}
					}
				}
			})
		},
		trigger: "4-vCPU nodes were allowed", reason: "DisruptionTerminating", text: string(karpv1.DisruptionReasonUnderutilized),
	}, {
		// A new template label drifts every NodeClaim of the NodePool.
		name: "drift", cpus: []string{"4"},
		pool: lifetimeOnly(func(*karpv1.NodePool) {}),
		disrupt: func(t *testing.T, pool string) {
			patchNodePool(t, pool, func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"team": "blue"} })
		},
		trigger: "the template changed", reason: "DisruptionTerminating", text: string(karpv1.DisruptionReasonDrifted),
	}, {
		// Soft expiry: disruption replaces the Expired NodeClaims through its queue.
		name: "expiry", cpus: []string{"4"},
		pool: lifetimeOnly(func(np *karpv1.NodePool) {
			np.Annotations = map[string]string{karpv1.ExpirationAnnotationKey: karpv1.ExpirationGraceful}
			np.Spec.Template.Spec.ExpireAfter = karpv1.NewNillableDuration(tenancyExpireAfter)
		}),
		trigger: "the pods ran (expireAfter " + tenancyExpireAfter.String() + ")", reason: "DisruptionTerminating", text: string(planner.DisruptionReasonExpired),
	}, {
		// Forceful expiry (the default): the NodeClaims are deleted and the provisioner places
		// their evicted pods, with the cross-tenant pod, on new nodes.
		name: "forceful-expiry", cpus: []string{"4"},
		pool: lifetimeOnly(func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.ExpireAfter = karpv1.NewNillableDuration(tenancyExpireAfter)
		}),
		trigger: "the pods ran (expireAfter " + tenancyExpireAfter.String() + ")", reason: expiration.ReasonExpired, text: "expired",
	}}
}

// TestReplacementsKeepTenancy is the tenancy breach of the reliability issue, through every path
// that replaces nodes. In each case a Pod of a namespace bound to the case's NodePool selects
// another tenant's NodePool, and got past the Pod webhooks (its namespace carries the binding
// annotation but not the label their namespaceSelector matches, which is what a webhook outage
// amounts to: Joiner's controllers go by the annotation alone). The provisioner launches nothing
// for it and says why in an Event. Then the two nodes of the case's NodePool are replaced: by
// consolidation, drift, soft expiry or forceful expiry. The pending Pod is in every one of those
// simulations, and before the fix consolidation, drift and soft expiry each launched a NodeClaim of
// the other tenant's NodePool for it (forceful expiry goes through the provisioner, which refused
// already). Sampled from the Pod's creation until the nodes are replaced: no NodeClaim of that
// NodePool ever exists and the Pod stays Pending, on no node. The cases run one after another, each
// with its own Pod and NodePools, so that a breach is blamed on the path that made it.
func TestReplacementsKeepTenancy(t *testing.T) {
	for _, tc := range replacementCases() {
		t.Run(tc.name, func(t *testing.T) {
			own, foreign := "tenancy-"+tc.name, "tenancy-"+tc.name+"-b"
			cluster.NodePool(t, foreign, framework.OnDemandC("4"), nil)
			breach := createBreachPod(t, own, own, foreign)
			keptTenancy := framework.Sample(tenancyHolds(client.ObjectKeyFromObject(breach), foreign))
			sampled := false
			finish := func() {
				if !sampled {
					sampled = true
					keptTenancy.Finish(t, fmt.Sprintf("tenancy e2e %s: 0 NodeClaims of another tenant's NodePool (%s) and the cross-tenant pod Pending on no node", tc.name, foreign))
				}
			}
			t.Cleanup(finish) // also when a wait below fails
			if !cluster.HasEvent(t, breach.Name, tenancy.ReasonViolation, "no capacity is launched for this pod in NodePool "+foreign) {
				t.Fatalf("no %s Event on the cross-tenant pod", tenancy.ReasonViolation)
			}
			replaceNodes(t, tc, own)
		})
	}
}

// replaceNodes creates the case's NodePool name with two 3-CPU pods that never share a node, has
// its two NodeClaims replaced the case's way, and checks that each went through that path.
func replaceNodes(t *testing.T, tc replacementCase, name string) {
	t.Helper()
	cluster.NodePool(t, name, framework.OnDemandC(tc.cpus...), tc.pool)
	cluster.Deployment(t, name, name, 2, "3", func(spec *corev1.PodSpec) {
		spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}},
		}}
	})
	cluster.WaitRunning(t, name, 2, 2*time.Minute)
	var old []string
	for _, nc := range framework.Live(cluster.NodeClaims(t, name)) {
		old = append(old, nc.Name)
	}
	if len(old) != 2 {
		t.Fatalf("want two nodes for two 3-CPU pods that avoid each other, got %d NodeClaims", len(old))
	}
	start := time.Now()
	if tc.disrupt != nil {
		tc.disrupt(t, name)
	}
	// What the wait saw last, logged if it gives up: a NodeClaim launched in excess (which nothing
	// removes with consolidation off) looks different from a replacement that never came.
	var last []string
	replaced := false
	defer func() {
		if !replaced {
			t.Logf("NodeClaims of %s when the wait ended: %v (the old ones: %v)", name, last, old)
		}
	}()
	framework.Eventually(t, 2*time.Minute, "both NodeClaims of "+name+" to be replaced", func(ctx context.Context) (bool, error) {
		claims := cluster.NodeClaims(t, name)
		last = last[:0]
		for _, nc := range claims {
			last = append(last, fmt.Sprintf("%s(initialized=%t)", nc.Name, meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized)))
		}
		for _, nc := range claims {
			if slices.Contains(old, nc.Name) || !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
				return false, nil
			}
		}
		return len(claims) == 2, nil
	})
	replaced = true
	cluster.WaitRunning(t, name, 2, time.Minute)
	t.Logf("tenancy e2e %s: both nodes replaced %s after %s", tc.name, time.Since(start).Round(100*time.Millisecond), tc.trigger)
	for _, nc := range old {
		if !cluster.HasEvent(t, nc, tc.reason, tc.text) {
			t.Errorf("NodeClaim %s has no %s Event naming %q: it was not replaced the %s way", nc, tc.reason, tc.text, tc.name)
		}
	}
}

// tenancyHolds is the invariant the cases sample: no NodeClaim of the NodePool foreign exists, and
// the cross-tenant pod is still there, Pending, on no node.
func tenancyHolds(pod client.ObjectKey, foreign string) func(ctx context.Context) string {
	return func(ctx context.Context) string {
		claims := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, claims, client.MatchingLabels{karpv1.NodePoolLabelKey: foreign}); err != nil {
			return ""
		}
		if len(claims.Items) > 0 {
			return fmt.Sprintf("NodeClaim %s of NodePool %s exists, which namespace %s is not bound to", claims.Items[0].Name, foreign, pod.Namespace)
		}
		got := &corev1.Pod{}
		switch err := cluster.Client.Get(ctx, pod, got); {
		case apierrors.IsNotFound(err):
			return "the cross-tenant pod is gone"
		case err != nil:
			return ""
		case got.Spec.NodeName != "":
			return fmt.Sprintf("the cross-tenant pod runs on node %s", got.Spec.NodeName)
		case got.Status.Phase != corev1.PodPending:
			return fmt.Sprintf("the cross-tenant pod is %s, not Pending", got.Status.Phase)
		}
		return ""
	}
}

// patchNodePool applies mutate to the NodePool name with a merge patch.
func patchNodePool(t *testing.T, name string, mutate func(*karpv1.NodePool)) {
	t.Helper()
	ctx := context.Background()
	np := &karpv1.NodePool{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: name}, np); err != nil {
		t.Fatalf("get NodePool %s: %v", name, err)
	}
	orig := np.DeepCopy()
	mutate(np)
	if err := cluster.Client.Patch(ctx, np, client.MergeFrom(orig)); err != nil {
		t.Fatalf("patch NodePool %s: %v", name, err)
	}
}

// createBreachPod creates the namespace ns, bound to the NodePool bound by its annotation only, and
// in it a pending Pod selecting the NodePool pool; both are deleted when the test ends.
func createBreachPod(t *testing.T, ns, bound, pool string) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Annotations: map[string]string{tenancy.NodePoolsAnnotation: bound}}}
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
