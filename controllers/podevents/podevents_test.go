package podevents_test

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

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/podevents"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// start is where the tests' fake clocks begin. It is a whole second because the API server
// stores lastPodEventTime with second precision.
var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// quiet is how long a test watches for a write that must not happen.
const quiet = 2 * time.Second

// startController starts the controller and returns once it handles pod events. The manager's
// caches can sync before the controller has registered its pod handler, and a pod event in
// between reaches the handler as part of the initial list, which does not count; so a canary
// NodeClaim gets fresh bound pods until one of them is recorded.
func startController(t *testing.T, clk *clocktesting.FakeClock, opts podevents.Options) ctrl.Manager {
	t.Helper()
	mgr := env.StartManager(t, func(mgr ctrl.Manager) error {
		return podevents.NewController(mgr.GetClient(), clk, opts).SetupWithManager(mgr)
	})
	ns := env.Namespace(t)
	canary, node := managedNode(t)
	nct.Eventually(t, 20*time.Second, "the controller handles pod events", func(ctx context.Context) error {
		if err := hasLastPodEventTime(ctx, env.Client, canary, clk.Now()); err == nil {
			return nil
		}
		if err := env.Client.Create(ctx, nct.Pod(ns, nct.Name("canary"), node.Name, nil)); err != nil {
			return err
		}
		return errors.New("no canary pod recorded yet")
	})
	return mgr
}

// managedNode creates a NodeClaim with a provider ID and the Node carrying it.
func managedNode(t *testing.T) (*karpv1.NodeClaim, *corev1.Node) {
	t.Helper()
	nc := nct.NodeClaim(nct.Name("nc"), "pool")
	if err := env.Client.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	stored := nc.DeepCopy()
	nc.Status.ProviderID = "fake:///" + nc.Name
	if err := env.Client.Status().Patch(t.Context(), nc, client.MergeFrom(stored)); err != nil {
		t.Fatal(err)
	}
	return nc, createNode(t, nc.Status.ProviderID)
}

// createNode creates a Node with the provider ID (no kubelet runs it).
func createNode(t *testing.T, providerID string) *corev1.Node {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nct.Name("node")}, Spec: corev1.NodeSpec{ProviderID: providerID}}
	if err := env.Client.Create(t.Context(), node); err != nil {
		t.Fatal(err)
	}
	return node
}

func createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	if err := env.Client.Create(t.Context(), pod); err != nil {
		t.Fatal(err)
	}
	return pod
}

// daemonSetPod returns a pod controlled by a DaemonSet (which does not exist; no garbage
// collector runs).
func daemonSetPod(namespace, nodeName string) *corev1.Pod {
	pod := nct.Pod(namespace, nct.Name("ds"), nodeName, nil)
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "agent", UID: "agent-uid", Controller: ptr.To(true)}}
	return pod
}

// bind binds the pod to the node the way kube-scheduler does, through the binding subresource.
func bind(t *testing.T, pod *corev1.Pod, nodeName string) {
	t.Helper()
	binding := &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if err := env.Client.SubResource("binding").Create(t.Context(), pod, binding); err != nil {
		t.Fatalf("bind pod %s: %v", pod.Name, err)
	}
}

// hasLastPodEventTime returns nil when the NodeClaim, read through r, has lastPodEventTime want
// (the zero time: unset).
func hasLastPodEventTime(ctx context.Context, r client.Reader, nc *karpv1.NodeClaim, want time.Time) error {
	got := &karpv1.NodeClaim{}
	if err := r.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
		return err
	}
	if !got.Status.LastPodEventTime.Time.Equal(want) {
		return fmt.Errorf("lastPodEventTime is %v, want %v", got.Status.LastPodEventTime.Time, want)
	}
	return nil
}

func TestPodEvents(t *testing.T) {
	unbound := func(t *testing.T, ns, _ string) *corev1.Pod { return createPod(t, nct.Pod(ns, nct.Name("p"), "", nil)) }
	bound := func(t *testing.T, ns, node string) *corev1.Pod {
		return createPod(t, nct.Pod(ns, nct.Name("p"), node, nil))
	}
	cases := []struct {
		name string
		// before creates the pod before the controller starts (nil: none). It is given the node
		// the case's pod belongs on.
		before func(t *testing.T, ns, node string) *corev1.Pod
		// act makes the pod event once the controller runs.
		act func(t *testing.T, ns, node string, pod *corev1.Pod)
		// unmanaged puts the pod on a Node that no NodeClaim carries.
		unmanaged bool
		// want says whether the NodeClaim's lastPodEventTime becomes now.
		want bool
	}{
		{
			name:   "binding a pod",
			before: unbound,
			act:    func(t *testing.T, _, node string, pod *corev1.Pod) { bind(t, pod, node) },
			want:   true,
		},
		{
			name: "creating a pod already bound",
			act:  func(t *testing.T, ns, node string, _ *corev1.Pod) { bound(t, ns, node) },
			want: true,
		},
		{
			name:   "binding a DaemonSet pod",
			before: func(t *testing.T, ns, _ string) *corev1.Pod { return createPod(t, daemonSetPod(ns, "")) },
			act:    func(t *testing.T, _, node string, pod *corev1.Pod) { bind(t, pod, node) },
		},
		{
			name: "creating a bound DaemonSet pod",
			act:  func(t *testing.T, ns, node string, _ *corev1.Pod) { createPod(t, daemonSetPod(ns, node)) },
		},
		{
			name:   "a pod completes",
			before: bound,
			act: func(t *testing.T, _, _ string, pod *corev1.Pod) {
				pod.Status.Phase = corev1.PodSucceeded
				if err := env.Client.Status().Update(t.Context(), pod); err != nil {
					t.Fatal(err)
				}
			},
			want: true,
		},
		{
			name:   "a pod fails",
			before: bound,
			act: func(t *testing.T, _, _ string, pod *corev1.Pod) {
				pod.Status.Phase = corev1.PodFailed
				if err := env.Client.Status().Update(t.Context(), pod); err != nil {
					t.Fatal(err)
				}
			},
			want: true,
		},
		{
			// With no kubelet, a pod deleted with a grace period stays terminating.
			name:   "a pod starts terminating",
			before: bound,
			act: func(t *testing.T, _, _ string, pod *corev1.Pod) {
				if err := env.Client.Delete(t.Context(), pod, client.GracePeriodSeconds(30)); err != nil {
					t.Fatal(err)
				}
			},
			want: true,
		},
		{
			// The API server marks the pod terminating before it removes it.
			name:   "a pod is deleted with no grace period",
			before: bound,
			act: func(t *testing.T, _, _ string, pod *corev1.Pod) {
				if err := env.Client.Delete(t.Context(), pod, client.GracePeriodSeconds(0)); err != nil {
					t.Fatal(err)
				}
			},
			want: true,
		},
		{
			name:   "a DaemonSet pod starts terminating",
			before: func(t *testing.T, ns, node string) *corev1.Pod { return createPod(t, daemonSetPod(ns, node)) },
			act: func(t *testing.T, _, _ string, pod *corev1.Pod) {
				if err := env.Client.Delete(t.Context(), pod, client.GracePeriodSeconds(30)); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:   "pods bound before the controller started",
			before: bound,
			act:    func(*testing.T, string, string, *corev1.Pod) {},
		},
		{
			name:   "a bound pod changes otherwise",
			before: bound,
			act: func(t *testing.T, _, _ string, pod *corev1.Pod) {
				pod.Labels = map[string]string{"example.com/touched": "true"}
				if err := env.Client.Update(t.Context(), pod); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name:      "binding a pod to a node without a nodeclaim",
			unmanaged: true,
			before:    unbound,
			act:       func(t *testing.T, _, node string, pod *corev1.Pod) { bind(t, pod, node) },
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			nc, node := managedNode(t)
			target := node.Name
			if tc.unmanaged {
				target = createNode(t, "fake:///unmanaged-"+nct.Name("i")).Name
			}
			var pod *corev1.Pod
			if tc.before != nil {
				pod = tc.before(t, ns, target)
			}
			clk := clocktesting.NewFakeClock(start)
			startController(t, clk, podevents.Options{})
			tc.act(t, ns, target, pod)
			if tc.want {
				nct.Eventually(t, 10*time.Second, "lastPodEventTime is now", func(ctx context.Context) error {
					return hasLastPodEventTime(ctx, env.Client, nc, start)
				})
				return
			}
			nct.Consistently(t, quiet, "lastPodEventTime stays unset", func(ctx context.Context) error {
				return hasLastPodEventTime(ctx, env.Client, nc, time.Time{})
			})
		})
	}
}

func TestPodEventsAreDeduplicated(t *testing.T) {
	cases := []struct {
		name string
		opts podevents.Options
		// step is how far the clock moves between the first event and the second.
		step time.Duration
		// want says whether the second event is written.
		want bool
	}{
		{name: "within the default 10s window", step: 5 * time.Second},
		{name: "just inside the default window", step: 9 * time.Second},
		{name: "past the default window", step: 11 * time.Second, want: true},
		{name: "past a shorter window", opts: podevents.Options{DedupeWindow: 2 * time.Second}, step: 5 * time.Second, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ns := env.Namespace(t)
			nc, node := managedNode(t)
			clk := clocktesting.NewFakeClock(start)
			mgr := startController(t, clk, tc.opts)

			createPod(t, nct.Pod(ns, nct.Name("first"), node.Name, nil))
			// The controller reads the stored time from its cache: wait until the cache has it,
			// so that the second event is judged against the first.
			nct.Eventually(t, 10*time.Second, "the first event is recorded and cached", func(ctx context.Context) error {
				return hasLastPodEventTime(ctx, mgr.GetClient(), nc, start)
			})

			clk.Step(tc.step)
			createPod(t, nct.Pod(ns, nct.Name("second"), node.Name, nil))
			if tc.want {
				nct.Eventually(t, 10*time.Second, "the second event is recorded", func(ctx context.Context) error {
					return hasLastPodEventTime(ctx, env.Client, nc, start.Add(tc.step))
				})
				return
			}
			nct.Consistently(t, quiet, "the second event is not written", func(ctx context.Context) error {
				return hasLastPodEventTime(ctx, env.Client, nc, start)
			})
		})
	}
}
