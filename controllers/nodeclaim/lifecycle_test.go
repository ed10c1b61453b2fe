package nodeclaim_test

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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/garbagecollection"
	"github.com/joiner-dev/joiner/controllers/nodeclaim"
	"github.com/joiner-dev/joiner/controllers/termination"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// startControllers runs every controller RegisterNodeLifecycle wires, against the fake provider,
// with short test timings and the real clock.
func startControllers(t *testing.T, cloud cloudprovider.CloudProvider, lifecycle nodeclaim.Options) {
	t.Helper()
	startControllersWithClock(t, cloud, lifecycle, nil)
}

// startControllersWithClock is startControllers with an injected clock (nil: the real one).
func startControllersWithClock(t *testing.T, cloud cloudprovider.CloudProvider, lifecycle nodeclaim.Options, clk clock.Clock) {
	t.Helper()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return controllers.RegisterNodeLifecycle(mgr, controllers.Dependencies{
			CloudProvider: cloud,
			Clock:         clk,
			Registerer:    prometheus.NewRegistry(),
			Options: controllers.Options{
				Lifecycle:         lifecycle,
				Termination:       termination.Options{PollInterval: 200 * time.Millisecond},
				GarbageCollection: garbagecollection.Options{Interval: time.Hour},
			},
		})
	})
}

func getNodeClaim(ctx context.Context, name string) (*karpv1.NodeClaim, error) {
	nc := &karpv1.NodeClaim{}
	return nc, env.Client.Get(ctx, client.ObjectKey{Name: name}, nc)
}

func TestNodeClaimGoesFromLaunchToReady(t *testing.T) {
	dedicated := karpv1.Taint{Key: "example.com/dedicated", Value: "team-a", Effect: corev1.TaintEffectNoSchedule}
	agent := karpv1.Taint{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute}
	cases := []struct {
		name          string
		taints        []karpv1.Taint
		startupTaints []karpv1.Taint
	}{
		{name: "plain"},
		{name: "taints are synced to the node", taints: []karpv1.Taint{dedicated}},
		{name: "initialization waits for startup taints to go", startupTaints: []karpv1.Taint{agent}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cloud := fake.New()
			startControllers(t, cloud, nodeclaim.Options{})
			nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
			nc.Spec.Taints, nc.Spec.StartupTaints = tc.taints, tc.startupTaints
			nc.Annotations = map[string]string{"example.com/owner": "team-a"}
			if err := env.Client.Create(t.Context(), nc); err != nil {
				t.Fatal(err)
			}

			// Launch: the provider's answer is written to the NodeClaim.
			nct.Eventually(t, 20*time.Second, "nodeclaim is launched", func(ctx context.Context) error {
				if err := env.Get(ctx, nc); err != nil {
					return err
				}
				return nct.Condition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, nodeclaim.ReasonLaunched)
			})
			if !strings.HasPrefix(nc.Status.ProviderID, "fake:///") || nc.Status.Capacity.Cpu().IsZero() || nc.Status.Allocatable.Memory().IsZero() {
				t.Fatalf("launch did not record the instance: %+v", nc.Status)
			}
			if nc.Labels[karpv1.LabelInstanceType] == "" || nc.Labels[karpv1.LabelTopologyZone] == "" || nc.Labels[karpv1.NodePoolLabelKey] != "pool-a" {
				t.Fatalf("launch did not record the resolved labels: %v", nc.Labels)
			}
			if !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
				t.Fatalf("nodeclaim has no termination finalizer: %v", nc.Finalizers)
			}
			if err := nct.Condition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionUnknown, nodeclaim.ReasonNodeNotFound); err != nil {
				t.Fatal(err)
			}
			if err := nct.Condition(nc, karpv1.ConditionTypeReady, metav1.ConditionUnknown, ""); err != nil {
				t.Fatal(err)
			}

			// Registration: the instance's Node joins and is taken over.
			node := nct.KwokNode(nct.Name("node"), nc.Status.ProviderID)
			if err := env.Client.Create(t.Context(), node); err != nil {
				t.Fatal(err)
			}
			nct.Eventually(t, 20*time.Second, "nodeclaim is registered", func(ctx context.Context) error {
				if err := env.Get(ctx, nc); err != nil {
					return err
				}
				return nct.Condition(nc, karpv1.ConditionTypeRegistered, metav1.ConditionTrue, nodeclaim.ReasonRegistered)
			})
			if nc.Status.NodeName != node.Name {
				t.Fatalf("status.nodeName %q, want %q", nc.Status.NodeName, node.Name)
			}
			if err := env.Get(t.Context(), node); err != nil {
				t.Fatal(err)
			}
			checkRegisteredNode(t, nc, node, append(slices.Clone(tc.taints), tc.startupTaints...))

			// Initialization: Ready node, startup taints gone.
			if len(tc.startupTaints) > 0 {
				nct.Eventually(t, 20*time.Second, "initialization waits for the startup taint", func(ctx context.Context) error {
					if err := env.Get(ctx, nc); err != nil {
						return err
					}
					return nct.Condition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, nodeclaim.ReasonStartupTaintsExist)
				})
				removeTaints(t, node, tc.startupTaints)
			}
			nct.Eventually(t, 30*time.Second, "nodeclaim is ready", func(ctx context.Context) error {
				if err := env.Get(ctx, nc); err != nil {
					return err
				}
				return errors.Join(
					nct.Condition(nc, karpv1.ConditionTypeInitialized, metav1.ConditionTrue, nodeclaim.ReasonInitialized),
					nct.Condition(nc, karpv1.ConditionTypeReady, metav1.ConditionTrue, ""))
			})
			if err := env.Get(t.Context(), node); err != nil {
				t.Fatal(err)
			}
			if node.Labels[karpv1.NodeInitializedLabelKey] != "true" {
				t.Errorf("node labels %v lack %s=true", node.Labels, karpv1.NodeInitializedLabelKey)
			}
			if n := len(cloud.CreateCalls()); n != 1 {
				t.Errorf("%d Create calls, want exactly 1", n)
			}
		})
	}
}

func checkRegisteredNode(t *testing.T, nc *karpv1.NodeClaim, node *corev1.Node, wantTaints []karpv1.Taint) {
	t.Helper()
	for _, key := range []string{karpv1.NodePoolLabelKey, karpv1.LabelInstanceType, karpv1.LabelTopologyZone, karpv1.CapacityTypeLabelKey} {
		if node.Labels[key] != nc.Labels[key] {
			t.Errorf("node label %s=%q, nodeclaim has %q", key, node.Labels[key], nc.Labels[key])
		}
	}
	if node.Labels[karpv1.NodeRegisteredLabelKey] != "true" {
		t.Errorf("node labels %v lack %s=true", node.Labels, karpv1.NodeRegisteredLabelKey)
	}
	if node.Annotations["example.com/owner"] != "team-a" {
		t.Errorf("node annotations %v lack the nodeclaim's", node.Annotations)
	}
	if !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) {
		t.Errorf("node finalizers %v lack %s", node.Finalizers, karpv1.TerminationFinalizer)
	}
	if !slices.ContainsFunc(node.OwnerReferences, func(o metav1.OwnerReference) bool {
		return o.UID == nc.UID && o.Kind == "NodeClaim" && o.APIVersion == karpv1.GroupVersion.String()
	}) {
		t.Errorf("node owner references %v do not name nodeclaim %s", node.OwnerReferences, nc.Name)
	}
	if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.UnregisteredTaintKey }) {
		t.Errorf("node still has the unregistered taint: %v", node.Spec.Taints)
	}
	for _, want := range wantTaints {
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool {
			return t.Key == want.Key && t.Effect == want.Effect && t.Value == want.Value
		}) {
			t.Errorf("node taints %v lack %s", node.Spec.Taints, want)
		}
	}
}

func removeTaints(t *testing.T, node *corev1.Node, taints []karpv1.Taint) {
	t.Helper()
	nct.Eventually(t, 10*time.Second, "startup taints removed", func(ctx context.Context) error {
		if err := env.Get(ctx, node); err != nil {
			return err
		}
		stored := node.DeepCopy()
		node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(n corev1.Taint) bool {
			return slices.ContainsFunc(taints, func(t karpv1.Taint) bool { return t.Key == n.Key && t.Effect == n.Effect })
		})
		return env.Client.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
	})
}

func TestLaunchFailures(t *testing.T) {
	cases := []struct {
		name  string
		setup func(*fake.CloudProvider)
		// deletedWith is the event reason of a NodeClaim that must be deleted; "" means it stays.
		deletedWith string
		// launchedFalse is the reason Launched=False must show while it stays.
		launchedFalse string
		// eventually launched after a transient error.
		recovers    bool
		eventReason string
		eventText   string
	}{
		{
			name:        "insufficient capacity deletes the nodeclaim",
			setup:       func(c *fake.CloudProvider) { c.InsufficientCapacity = []fake.CapacityPool{{}} },
			deletedWith: nodeclaim.ReasonInsufficientCapacity, eventText: "insufficient capacity",
		},
		{
			name: "a node class that is not ready deletes the nodeclaim",
			setup: func(c *fake.CloudProvider) {
				c.FailNextCreate(cloudprovider.NewNodeClassNotReadyError(errors.New("LocalNodeClass default has no zones")))
			},
			deletedWith: nodeclaim.ReasonNodeClassNotReady, eventText: "has no zones",
		},
		{
			name: "a transient error is retried",
			setup: func(c *fake.CloudProvider) {
				c.FailNextCreate(cloudprovider.NewCreateError(errors.New("throttled"), "RequestLimitExceeded", "the provider throttled the launch"))
			},
			recovers: true, eventReason: "RequestLimitExceeded", eventText: "throttled the launch",
		},
		{
			name:          "a persistent error keeps the nodeclaim with Launched=False",
			setup:         func(c *fake.CloudProvider) { c.InstanceTypes = fake.InstanceTypes(0) },
			launchedFalse: nodeclaim.ReasonLaunchFailed, eventReason: nodeclaim.ReasonLaunchFailed, eventText: "no instance type satisfies",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cloud := fake.New()
			tc.setup(cloud)
			startControllers(t, cloud, nodeclaim.Options{})
			nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
			if err := env.Client.Create(t.Context(), nc); err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.deletedWith != "":
				nct.Eventually(t, 20*time.Second, "nodeclaim is deleted", func(ctx context.Context) error {
					return errors.Join(env.Gone(ctx, nc), env.HasEvent(ctx, nc.Name, tc.deletedWith, tc.eventText))
				})
				if ids := providerIDs(t, cloud); len(ids) > 0 {
					t.Errorf("instances %v launched for a failed nodeclaim", ids)
				}
			case tc.recovers:
				nct.Eventually(t, 20*time.Second, "nodeclaim launches on retry", func(ctx context.Context) error {
					if err := env.Get(ctx, nc); err != nil {
						return err
					}
					return errors.Join(nct.Condition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, ""),
						env.HasEvent(ctx, nc.Name, tc.eventReason, tc.eventText))
				})
				if n := len(cloud.CreateCalls()); n != 2 {
					t.Errorf("%d Create calls, want 2 (one failure, one success)", n)
				}
			default:
				nct.Eventually(t, 20*time.Second, "launch failure is reported", func(ctx context.Context) error {
					if err := env.Get(ctx, nc); err != nil {
						return err
					}
					if err := nct.Condition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionFalse, tc.launchedFalse); err != nil {
						return err
					}
					if c := nc.StatusCondition(karpv1.ConditionTypeLaunched); !strings.Contains(c.Message, tc.eventText) {
						return fmt.Errorf("Launched message %q lacks %q", c.Message, tc.eventText)
					}
					return env.HasEvent(ctx, nc.Name, tc.eventReason, tc.eventText)
				})
				nct.Consistently(t, time.Second, "nodeclaim stays", func(ctx context.Context) error { return env.Get(ctx, nc) })
			}
		})
	}
}

// TestLivenessDeletesNodeClaimsThatMakeNoProgress drives the default TTLs (5 minutes to launch,
// 15 minutes to register) with a fake clock: it steps the clock to just inside the TTL, then past
// it, and after each step touches the NodeClaim so that the controller looks at it again.
func TestLivenessDeletesNodeClaimsThatMakeNoProgress(t *testing.T) {
	cases := []struct {
		name  string
		setup func(*fake.CloudProvider)
		// ttl is the default TTL of the stage the NodeClaim is stuck in; since returns when it
		// started counting.
		ttl       time.Duration
		since     func(nc *karpv1.NodeClaim) (time.Time, error)
		reason    string
		eventText string
	}{
		{
			name: "launched but never registered",
			ttl:  nodeclaim.DefaultRegistrationTTL,
			since: func(nc *karpv1.NodeClaim) (time.Time, error) {
				if err := nct.Condition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, ""); err != nil {
					return time.Time{}, err
				}
				return nc.StatusCondition(karpv1.ConditionTypeLaunched).LastTransitionTime.Time, nil
			},
			reason: nodeclaim.ReasonRegistrationTimeout, eventText: "did not register within 15m0s",
		},
		{
			name:  "never launched",
			setup: func(c *fake.CloudProvider) { c.InstanceTypes = fake.InstanceTypes(0) },
			ttl:   nodeclaim.DefaultLaunchTTL,
			since: func(nc *karpv1.NodeClaim) (time.Time, error) {
				if err := nct.Condition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionFalse, ""); err != nil {
					return time.Time{}, err
				}
				return nc.CreationTimestamp.Time, nil
			},
			reason: nodeclaim.ReasonLaunchTimeout, eventText: "did not launch within 5m0s",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cloud := fake.New()
			if tc.setup != nil {
				tc.setup(cloud)
			}
			clk := clocktesting.NewFakeClock(time.Now())
			startControllersWithClock(t, cloud, nodeclaim.Options{}, clk)
			nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
			if err := env.Client.Create(t.Context(), nc); err != nil {
				t.Fatal(err)
			}
			var start time.Time
			nct.Eventually(t, 10*time.Second, "the stage the nodeclaim is stuck in", func(ctx context.Context) error {
				n, err := getNodeClaim(ctx, nc.Name)
				if err != nil {
					return err
				}
				start, err = tc.since(n)
				return err
			})

			clk.SetTime(start.Add(tc.ttl - time.Second))
			touch(t, nc.Name, "inside-ttl")
			nct.Consistently(t, time.Second, "nodeclaim lives within its TTL", func(ctx context.Context) error {
				n, err := getNodeClaim(ctx, nc.Name)
				if err == nil && !n.DeletionTimestamp.IsZero() {
					return errors.New("nodeclaim is being deleted")
				}
				return err
			})

			clk.SetTime(start.Add(tc.ttl + time.Second))
			touch(t, nc.Name, "past-ttl")
			nct.Eventually(t, 20*time.Second, "nodeclaim is deleted after its TTL", func(ctx context.Context) error {
				return errors.Join(env.Gone(ctx, nc), env.HasEvent(ctx, nc.Name, tc.reason, tc.eventText))
			})
			if ids := providerIDs(t, cloud); len(ids) > 0 {
				t.Errorf("instances %v outlived their nodeclaim", ids)
			}
		})
	}
}

// touch changes an annotation of the NodeClaim, so that its controllers reconcile it again (after
// a step of the fake clock, which by itself wakes nothing).
func touch(t *testing.T, name, value string) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"test.joiner.dev/touched":"`+value+`"}}}`))
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Patch(t.Context(), nc, patch); err != nil {
		t.Fatalf("touch nodeclaim %s: %v", name, err)
	}
}

func providerIDs(t *testing.T, cloud *fake.CloudProvider) []string {
	t.Helper()
	instances, err := cloud.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range instances {
		ids = append(ids, i.Status.ProviderID)
	}
	return ids
}

// slowLaunch is the fake provider with a Create that waits until released, to delete a
// NodeClaim while its instance is being launched.
type slowLaunch struct {
	*fake.CloudProvider
	started chan struct{}
	release chan struct{}
}

func (s *slowLaunch) Create(ctx context.Context, nc *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	select {
	case s.started <- struct{}{}:
	default:
	}
	<-s.release
	return s.CloudProvider.Create(ctx, nc)
}

func TestNodeClaimDeletedDuringLaunchDoesNotLeakItsInstance(t *testing.T) {
	cloud := &slowLaunch{CloudProvider: fake.New(), started: make(chan struct{}, 1), release: make(chan struct{})}
	startControllers(t, cloud, nodeclaim.Options{})
	released := false
	t.Cleanup(func() {
		if !released {
			close(cloud.release)
		}
	})
	nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
	if err := env.Client.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	select {
	case <-cloud.started:
	case <-time.After(20 * time.Second):
		t.Fatal("launch did not start")
	}
	if err := env.Client.Delete(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 10*time.Second, "nodeclaim gone", func(ctx context.Context) error { return env.Gone(ctx, nc) })
	close(cloud.release)
	released = true
	nct.Eventually(t, 10*time.Second, "the instance launched for it is terminated", func(ctx context.Context) error {
		if ids := providerIDs(t, cloud.CloudProvider); len(ids) > 0 {
			return fmt.Errorf("instances %v still exist", ids)
		}
		if len(cloud.CreateCalls()) != 1 || len(cloud.DeleteCalls()) != 1 {
			return fmt.Errorf("%d Create and %d Delete calls, want 1 each", len(cloud.CreateCalls()), len(cloud.DeleteCalls()))
		}
		return nil
	})
}
