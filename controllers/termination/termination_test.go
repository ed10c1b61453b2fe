package termination_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/garbagecollection"
	"github.com/joiner-dev/joiner/controllers/termination"
	"github.com/joiner-dev/joiner/controllers/termination/terminationtest"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// startControllers runs the lifecycle and termination controllers (and the rest RegisterNodeLifecycle wires)
// against the fake provider.
func startControllers(t *testing.T, cloud cloudprovider.CloudProvider) {
	t.Helper()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return controllers.RegisterNodeLifecycle(mgr, controllers.Dependencies{
			CloudProvider: cloud,
			Registerer:    prometheus.NewRegistry(),
			Options: controllers.Options{
				Termination:       termination.Options{PollInterval: 200 * time.Millisecond},
				GarbageCollection: garbagecollection.Options{Interval: time.Hour},
			},
		})
	})
}

// readyNodeClaim creates the NodeClaim, lets it launch, joins a kwok Node for it and waits until
// the NodeClaim is Ready.
func readyNodeClaim(t *testing.T, nc *karpv1.NodeClaim) *corev1.Node {
	t.Helper()
	if err := env.Client.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 20*time.Second, "nodeclaim launched", func(ctx context.Context) error {
		if err := env.Get(ctx, nc); err != nil {
			return err
		}
		return nct.Condition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "")
	})
	node := nct.KwokNode(nct.Name("node"), nc.Status.ProviderID)
	if err := env.Client.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 30*time.Second, "nodeclaim ready", func(ctx context.Context) error {
		if err := env.Get(ctx, nc); err != nil {
			return err
		}
		return nct.Condition(nc, karpv1.ConditionTypeReady, metav1.ConditionTrue, "")
	})
	return node
}

// orphanNode launches an instance directly (no NodeClaim) and joins a kwok Node for it that
// carries the termination finalizer, as a Node registered earlier whose NodeClaim is gone.
func orphanNode(t *testing.T, cloud *fake.CloudProvider) *corev1.Node {
	t.Helper()
	inst, err := cloud.Create(t.Context(), nct.NodeClaim(nct.Name("gone"), "pool-a"))
	if err != nil {
		t.Fatal(err)
	}
	node := nct.KwokNode(nct.Name("node"), inst.Status.ProviderID)
	node.Spec.Taints = nil
	node.Finalizers = []string{karpv1.TerminationFinalizer}
	if err := env.Client.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 30*time.Second, "node ready and schedulable", func(ctx context.Context) error {
		if err := env.Get(ctx, node); err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && len(node.Spec.Taints) == 0 {
				return nil
			}
		}
		return fmt.Errorf("node %s not ready yet (taints %v)", node.Name, node.Spec.Taints)
	})
	return node
}

// workload puts pods on the node: "free" (no protection), "web" (a PodDisruptionBudget with
// minAvailable 1 covers it), "tolerant" (tolerates the disrupted taint) and a DaemonSet pod (its
// group is evicted only after "web" is gone). It waits until they all run and the budget allows
// no disruption.
func workload(t *testing.T, node *corev1.Node) (ns string, pdb *policyv1.PodDisruptionBudget) {
	t.Helper()
	ns = env.Namespace(t)
	tolerant := nct.Pod(ns, "tolerant", node.Name, nil)
	tolerant.Spec.Tolerations = append(tolerant.Spec.Tolerations, corev1.Toleration{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists})
	pdb = &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptrTo(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
	}
	ds := terminationtest.DaemonSet(ns, "agent", map[string]string{corev1.LabelHostname: node.Name}, "")
	for _, o := range []client.Object{
		nct.Pod(ns, "free", node.Name, map[string]string{"app": "free"}),
		nct.Pod(ns, "web", node.Name, map[string]string{"app": "web"}),
		tolerant, pdb, ds,
	} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	nct.Eventually(t, 30*time.Second, "workload running and budget computed", func(ctx context.Context) error {
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return err
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node.Name {
				running++
			}
		}
		if running != 4 {
			return fmt.Errorf("%d of 4 pods running on %s", running, node.Name)
		}
		if err := env.Get(ctx, pdb); err != nil {
			return err
		}
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.CurrentHealthy != 1 || pdb.Status.DisruptionsAllowed != 0 {
			return fmt.Errorf("budget status %+v", pdb.Status)
		}
		return nil
	})
	return ns, pdb
}

func ptrTo[T any](v T) *T { return &v }

func podNames(ctx context.Context, ns string) ([]string, error) {
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	var names []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp.IsZero() {
			names = append(names, p.Name)
		}
	}
	slices.Sort(names)
	return names, nil
}

func instanceExists(ctx context.Context, cloud *fake.CloudProvider, providerID string) error {
	_, err := cloud.Get(ctx, providerID)
	return err
}

func TestTerminationDrainsBeforeTerminating(t *testing.T) {
	cases := []struct {
		name string
		// orphan starts from a Node whose NodeClaim is gone instead of a Ready NodeClaim.
		orphan bool
		// deleteNode deletes the Node rather than the NodeClaim.
		deleteNode bool
	}{
		{name: "deleting the nodeclaim"},
		{name: "deleting the node", deleteNode: true},
		{name: "deleting a node without nodeclaim", orphan: true, deleteNode: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cloud := fake.New()
			startControllers(t, cloud)
			var (
				nc   *karpv1.NodeClaim
				node *corev1.Node
			)
			if tc.orphan {
				node = orphanNode(t, cloud)
			} else {
				nc = nct.NodeClaim(nct.Name("nc"), "pool-a")
				node = readyNodeClaim(t, nc)
			}
			providerID := node.Spec.ProviderID
			ns, pdb := workload(t, node)

			var victim client.Object = nc
			if tc.deleteNode {
				victim = node
			}
			if err := env.Client.Delete(t.Context(), victim); err != nil {
				t.Fatal(err)
			}

			// The drain evicts what it may and stops at the budget.
			nct.Eventually(t, 20*time.Second, "node tainted and unprotected pod evicted", func(ctx context.Context) error {
				if err := env.Get(ctx, node); err != nil {
					return err
				}
				if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.DisruptedTaintKey }) {
					return fmt.Errorf("node taints %v lack %s", node.Spec.Taints, karpv1.DisruptedTaintKey)
				}
				if node.Labels[corev1.LabelNodeExcludeBalancers] != karpv1.ExcludeFromExternalLoadBalancersLabelValue {
					return fmt.Errorf("node labels %v lack the load balancer exclusion", node.Labels)
				}
				names, err := podNames(ctx, ns)
				if err != nil {
					return err
				}
				if slices.Contains(names, "free") {
					return fmt.Errorf("pods %v: free not evicted yet", names)
				}
				return env.HasEvent(ctx, "web", termination.ReasonEvictionBlocked, "disruption budget")
			})
			if nc != nil {
				nct.Eventually(t, 10*time.Second, "nodeclaim reports the drain", func(ctx context.Context) error {
					if err := env.Get(ctx, nc); err != nil {
						return err
					}
					if nc.DeletionTimestamp.IsZero() {
						return errors.New("nodeclaim is not being deleted")
					}
					if err := nct.Condition(nc, karpv1.ConditionTypeDrained, metav1.ConditionFalse, termination.ReasonDraining); err != nil {
						return err
					}
					if msg := nc.StatusCondition(karpv1.ConditionTypeDrained).Message; !strings.Contains(msg, ns+"/web") {
						return fmt.Errorf("Drained message %q does not name the blocked pod", msg)
					}
					return nil
				})
			}
			nct.Consistently(t, 2*time.Second, "nothing is terminated while the budget blocks", func(ctx context.Context) error {
				names, err := podNames(ctx, ns)
				if err != nil {
					return err
				}
				if len(names) != 3 || !slices.Contains(names, "web") || !slices.Contains(names, "tolerant") {
					return fmt.Errorf("pods %v, want agent-*, tolerant and web", names)
				}
				if err := env.Get(ctx, node); err != nil {
					return fmt.Errorf("node: %w", err)
				}
				if nc != nil {
					if err := env.Get(ctx, nc); err != nil {
						return fmt.Errorf("nodeclaim: %w", err)
					}
				}
				return instanceExists(ctx, cloud, providerID)
			})

			// Relaxing the budget lets the drain finish, and then everything goes.
			stored := pdb.DeepCopy()
			pdb.Spec.MinAvailable = ptrTo(intstr.FromInt32(0))
			if err := env.Client.Patch(t.Context(), pdb, client.MergeFrom(stored)); err != nil {
				t.Fatal(err)
			}
			nct.Eventually(t, 30*time.Second, "node, nodeclaim and instance gone", func(ctx context.Context) error {
				errs := []error{env.Gone(ctx, node)}
				if nc != nil {
					errs = append(errs, env.Gone(ctx, nc))
				}
				if err := instanceExists(ctx, cloud, providerID); !cloudprovider.IsNodeClaimNotFound(err) {
					errs = append(errs, fmt.Errorf("instance %s still exists (%v)", providerID, err))
				}
				return errors.Join(errs...)
			})
			for _, pod := range []string{"free", "web"} {
				if err := env.HasEvent(t.Context(), pod, termination.ReasonEvicted, node.Name); err != nil {
					t.Error(err)
				}
			}
			evicted, err := env.Events(t.Context(), "tolerant", termination.ReasonEvicted)
			if err != nil || len(evicted) > 0 {
				t.Errorf("the pod tolerating the disrupted taint was evicted (%v)", err)
			}
			if tc.deleteNode && nc != nil {
				if err := env.HasEvent(t.Context(), nc.Name, termination.ReasonNodeDeleted, node.Name); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

func TestTerminationGracePeriodEndsTheDrain(t *testing.T) {
	cloud := fake.New()
	startControllers(t, cloud)
	nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
	nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 4 * time.Second}
	node := readyNodeClaim(t, nc)
	ns := env.Namespace(t)
	protected := nct.Pod(ns, "protected", node.Name, nil)
	protected.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	budgeted := nct.Pod(ns, "budgeted", node.Name, map[string]string{"app": "budgeted"})
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "budgeted"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: ptrTo(intstr.FromInt32(1)),
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "budgeted"}},
		},
	}
	for _, o := range []client.Object{protected, budgeted, pdb} {
		if err := env.Client.Create(t.Context(), o); err != nil {
			t.Fatal(err)
		}
	}
	nct.Eventually(t, 30*time.Second, "pods running and budget computed", func(ctx context.Context) error {
		if err := errors.Join(env.Get(ctx, protected), env.Get(ctx, budgeted), env.Get(ctx, pdb)); err != nil {
			return err
		}
		if protected.Status.Phase != corev1.PodRunning || budgeted.Status.Phase != corev1.PodRunning {
			return errors.New("pods not running yet")
		}
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.DisruptionsAllowed != 0 || pdb.Status.CurrentHealthy != 1 {
			return fmt.Errorf("budget status %+v", pdb.Status)
		}
		return nil
	})

	if err := env.Client.Delete(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 10*time.Second, "deadline stamped", func(ctx context.Context) error {
		if err := env.Get(ctx, nc); err != nil {
			return err
		}
		v := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]
		deadline, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return fmt.Errorf("termination timestamp %q: %w", v, err)
		}
		if want := nc.DeletionTimestamp.Add(4 * time.Second); !deadline.Equal(want) {
			return fmt.Errorf("deadline %s, want %s", deadline, want)
		}
		return nil
	})
	nct.Consistently(t, 2*time.Second, "protected pods stay before the deadline", func(ctx context.Context) error {
		names, err := podNames(ctx, ns)
		if err != nil {
			return err
		}
		if !slices.Equal(names, []string{"budgeted", "protected"}) {
			return fmt.Errorf("pods %v", names)
		}
		return instanceExists(ctx, cloud, node.Spec.ProviderID)
	})
	nct.Eventually(t, 20*time.Second, "pods deleted at the deadline, then everything goes", func(ctx context.Context) error {
		err := errors.Join(env.Gone(ctx, protected), env.Gone(ctx, budgeted), env.Gone(ctx, nc), env.Gone(ctx, node))
		if ierr := instanceExists(ctx, cloud, node.Spec.ProviderID); !cloudprovider.IsNodeClaimNotFound(ierr) {
			err = errors.Join(err, fmt.Errorf("instance still exists (%v)", ierr))
		}
		return err
	})
	for _, pod := range []string{"protected", "budgeted"} {
		if err := env.HasEvent(t.Context(), pod, termination.ReasonDeletedAtDeadline, "terminationGracePeriod"); err != nil {
			t.Error(err)
		}
	}
	if evs, err := env.Events(t.Context(), "protected", termination.ReasonEvicted); err != nil || len(evs) > 0 {
		t.Errorf("the do-not-disrupt pod was evicted before the deadline (%v)", err)
	}
}

// TestStampedDeadlineWithoutGracePeriod: node repair and instance health stamp "now" as the
// termination deadline on NodeClaims that may have no terminationGracePeriod; the drain honours
// it, deleting a do-not-disrupt pod at once instead of waiting on it forever.
func TestStampedDeadlineWithoutGracePeriod(t *testing.T) {
	cloud := fake.New()
	startControllers(t, cloud)
	nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
	node := readyNodeClaim(t, nc)
	ns := env.Namespace(t)
	protected := nct.Pod(ns, "protected", node.Name, nil)
	protected.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
	if err := env.Client.Create(t.Context(), protected); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 30*time.Second, "pod running", func(ctx context.Context) error {
		if err := env.Get(ctx, protected); err != nil {
			return err
		}
		if protected.Status.Phase != corev1.PodRunning {
			return errors.New("pod not running yet")
		}
		return nil
	})
	if err := env.Get(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	stored := nc.DeepCopy()
	nc.Annotations = map[string]string{karpv1.NodeClaimTerminationTimestampAnnotationKey: time.Now().UTC().Format(time.RFC3339)}
	if err := env.Client.Patch(t.Context(), nc, client.MergeFrom(stored)); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 20*time.Second, "the do-not-disrupt pod deleted at the stamped deadline, then everything goes", func(ctx context.Context) error {
		err := errors.Join(env.Gone(ctx, protected), env.Gone(ctx, nc), env.Gone(ctx, node))
		if ierr := instanceExists(ctx, cloud, node.Spec.ProviderID); !cloudprovider.IsNodeClaimNotFound(ierr) {
			err = errors.Join(err, fmt.Errorf("instance still exists (%v)", ierr))
		}
		return err
	})
	if err := env.HasEvent(t.Context(), "protected", termination.ReasonDeletedAtDeadline, ""); err != nil {
		t.Error(err)
	}
}
