package termination_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	tt "github.com/joiner-dev/joiner/controllers/termination/terminationtest"
	"github.com/joiner-dev/joiner/e2e/framework"
)

// The attach-detach model of TestVolumeDetachFigure. A CSI volume detaches unmountDelay after its
// pod left the node (the kubelet unmounts, the attach-detach controller detaches) if the instance
// still runs then. If the instance was terminated first, the kubelet never reports the unmount,
// and Kubernetes' attach-detach controller force-detaches only after maxWaitForUnmountDuration:
// 6 minutes, played here by forceDetachAfter. A read-write-once volume attaches to the new node
// only once it detached from the old one, and the pod starts only once it is attached.
const (
	unmountDelay     = 2 * time.Second
	forceDetachAfter = 10 * time.Second
	realForceDetach  = 6 * time.Minute
)

// timeline is what one run of the model saw, each since the NodeClaim was deleted.
type timeline struct {
	podLeft, detached, scheduled, attached time.Duration
	forced                                 bool
}

// TestVolumeDetachFigure measures the time from the deletion of a NodeClaim to its StatefulSet pod
// running elsewhere with its volume attached, with the volume wait and without it (a
// terminationGracePeriod of 0s, whose deadline has passed at once: the instance is terminated right
// after the drain, as before the wait existed), under the model above.
func TestVolumeDetachFigure(t *testing.T) {
	cases := []struct {
		name string
		wait bool
	}{
		{name: "with the wait", wait: true},
		{name: "without the wait", wait: false},
	}
	results := map[bool]timeline{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := "figure-nowait"
			if tc.wait {
				name = "figure-wait"
			}
			pool(t, name, func(np *karpv1.NodePool) {
				if !tc.wait {
					np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{}
				}
			})
			pv := statefulSet(t, name, name)
			old := cluster.WaitRunning(t, name, 1, 2*time.Minute)[0]
			tt.Create(t, cluster.Client, tt.Attachment(pv.Name, old.Spec.NodeName))
			nc := nodeClaimOf(t, name, old.Spec.NodeName)
			scheme := cluster.Client.Scheme()
			pods := tt.RecordForTest(t, cluster.Env.Config, scheme, &corev1.PodList{}, client.InNamespace("default"), client.MatchingLabels{"app": name})
			nodes := tt.RecordForTest(t, cluster.Env.Config, scheme, &corev1.NodeList{})
			claims := tt.RecordForTest(t, cluster.Env.Config, scheme, &karpv1.NodeClaimList{})
			start := time.Now()
			if err := cluster.Client.Delete(context.Background(), nc); err != nil {
				t.Fatal(err)
			}
			tl := attachDetach(t, pods, nodes, &old, pv.Name, start)
			results[tc.wait] = tl
			t.Logf("%s: pod left its node after %s, volume detached after %s (forced: %v), pod scheduled elsewhere after %s, volume attached there (pod can run) after %s",
				tc.name, tl.podLeft, tl.detached, tl.forced, tl.scheduled, tl.attached)
			released := waitFor(t, claims, "the NodeClaim released", func(c tt.Change) bool {
				return c.Type == watch.Deleted && c.Object.GetName() == nc.Name
			})
			t.Logf("%s: NodeClaim released %s after its deletion", tc.name, released.Sub(start).Round(100*time.Millisecond))
			if tl.forced == tc.wait {
				t.Errorf("forced detach %v, want %v: the wait must keep the instance until the volume detached", tl.forced, !tc.wait)
			}
		})
	}
	with, without := results[true], results[false]
	if with.attached == 0 || without.attached == 0 {
		t.Fatal("a scenario did not finish")
	}
	real := without.attached - forceDetachAfter + realForceDetach
	t.Logf("FIGURE node deletion -> StatefulSet pod running elsewhere: with the wait %s, without %s (force-detach played by %s; with the real %s: about %s)",
		with.attached.Round(100*time.Millisecond), without.attached.Round(100*time.Millisecond), forceDetachAfter, realForceDetach, real.Round(time.Second))
	if with.attached >= without.attached {
		t.Errorf("the wait did not make the pod run sooner: %s with it, %s without", with.attached, without.attached)
	}
}

// attachDetach plays the CSI driver and the attach-detach controller for the StatefulSet's volume
// pv after its NodeClaim was deleted at start, and returns what happened when.
func attachDetach(t *testing.T, pods, nodes *tt.Recorder, old *corev1.Pod, pv string, start time.Time) timeline {
	t.Helper()
	var tl timeline
	left := waitFor(t, pods, "the StatefulSet pod leaves its node", func(c tt.Change) bool {
		return c.Object.GetUID() == old.UID && (c.Type == watch.Deleted || c.Object.GetDeletionTimestamp() != nil)
	})
	tl.podLeft = left.Sub(start)
	// The waits below are the simulated detacher's own timings (the unmount delay and the
	// force-detach timeout the figure measures), not waits for a condition: the deadlines are
	// what is being modelled, so they run on the wall clock the figure reports.
	time.Sleep(time.Until(left.Add(unmountDelay)))
	terminated, ok := nodes.FirstAt(func(c tt.Change) bool {
		return c.Object.GetName() == old.Spec.NodeName && (c.Type == watch.Deleted || c.Object.GetDeletionTimestamp() != nil)
	})
	if ok && terminated.Before(left.Add(unmountDelay)) {
		tl.forced = true
		time.Sleep(time.Until(left.Add(forceDetachAfter)))
	}
	if err := cluster.Client.Delete(context.Background(), tt.Attachment(pv, old.Spec.NodeName)); err != nil {
		t.Fatalf("detach: %v", err)
	}
	detached := time.Now()
	tl.detached = detached.Sub(start)
	var newNode string
	scheduled := waitFor(t, pods, "the replacement pod runs elsewhere", func(c tt.Change) bool {
		p, ok := c.Object.(*corev1.Pod)
		if ok && p.UID != old.UID && p.Spec.NodeName != "" && p.Spec.NodeName != old.Spec.NodeName && p.Status.Phase == corev1.PodRunning {
			newNode = p.Spec.NodeName
			return true
		}
		return false
	})
	tl.scheduled = scheduled.Sub(start)
	// Attaching takes no time in the model; it can start only once both happened.
	tl.attached = max(tl.scheduled, tl.detached)
	tt.Create(t, cluster.Client, tt.Attachment(pv, newNode))
	return tl
}

// waitFor waits up to 2 minutes for a recorded change that match accepts and returns when it
// was recorded.
func waitFor(t *testing.T, r *tt.Recorder, what string, match func(tt.Change) bool) time.Time {
	t.Helper()
	var at time.Time
	framework.Eventually(t, 2*time.Minute, what, func(context.Context) (bool, error) {
		var ok bool
		at, ok = r.FirstAt(match)
		return ok, nil
	})
	return at
}
