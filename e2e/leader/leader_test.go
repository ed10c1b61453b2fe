package leader_test

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
)

const (
	// pause is how long kube-apiserver is stopped: longer than the renew deadline (10 s), so the
	// leader loses its Lease, and than the lease duration (15 s), so a follower may take it over.
	pause = 20 * time.Second
	// leaderWithin is the target: a leader that works within this time of the apiserver's resume.
	leaderWithin = 30 * time.Second
	// podCPU is what each pod asks for: on the 2-vCPU nodes of the NodePools, one pod per node,
	// so the right number of NodeClaims is the number of pods.
	podCPU = "1500m"
)

// TestLeadershipSurvivesAnAPIServerPause pauses kube-apiserver for 20 s while the leader is
// launching NodeClaims for pending pods, and requires, after the resume: within 30 s exactly one
// live replica holds the Lease and reports itself leader, and it reconciles (NodeClaims for pods
// created after the resume, written by it); every pod gets exactly one NodeClaim with one Node (the
// NodeClaims are sampled throughout); and neither replica exits.
func TestLeadershipSurvivesAnAPIServerPause(t *testing.T) {
	ensureNodeClass(t)
	for _, pool := range []string{"before", "after"} {
		cluster.NodePool(t, pool, framework.OnDemandC("2"), func(np *karpv1.NodePool) {
			np.Spec.Disruption.ConsolidateAfter = karpv1.NeverDuration()
		})
	}
	first := waitLeader(t, time.Time{}, 60*time.Second)
	t.Logf("leader before the pause: %s", first)

	launches := sampleNodeClaims(map[string]int{"before": 3, "after": 2})
	createPods(t, "before", 3)
	// Pause in the middle of the launch: as soon as the leader has created the first NodeClaim.
	framework.Eventually(t, 30*time.Second, "the first NodeClaim of the pending pods", func(ctx context.Context) (bool, error) {
		return len(cluster.NodeClaims(t, "before")) > 0, nil
	})
	apiserver, err := cluster.Env.APIServerProcess()
	if err != nil {
		t.Fatal(err)
	}
	if err := apiserver.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("pause kube-apiserver: %v", err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = apiserver.Signal(syscall.SIGCONT)
		}
	})
	t.Logf("kube-apiserver paused for %s with %d of 3 NodeClaims created", pause, launches.count("before"))
	<-time.After(pause) // the outage under test
	if err := apiserver.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("resume kube-apiserver: %v", err)
	}
	resumedAt := time.Now()
	resumed = true

	createPods(t, "after", 2)
	leader := waitLeader(t, resumedAt, leaderWithin)
	elected := time.Since(resumedAt)
	var working time.Duration
	framework.Eventually(t, time.Until(resumedAt.Add(leaderWithin)), "NodeClaims for the pods created after the resume", func(ctx context.Context) (bool, error) {
		if len(cluster.NodeClaims(t, "after")) < 2 {
			return false, nil
		}
		working = time.Since(resumedAt)
		return true, nil
	})
	for _, nc := range cluster.NodeClaims(t, "after") {
		for _, mf := range nc.ManagedFields {
			if mf.Manager != fieldManager(leader) {
				t.Errorf("NodeClaim %s written by %q after the resume, want only the leader %s", nc.Name, mf.Manager, leader)
			}
		}
	}
	cluster.WaitRunning(t, "before", 3, 60*time.Second)
	cluster.WaitRunning(t, "after", 2, 60*time.Second)
	framework.Hold(t, 5*time.Second, "every NodeClaim has one Node and every Node a NodeClaim", func(context.Context) string {
		// A read of its own: the window's context may end in the middle of one.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return nodesMatchClaims(ctx, t, "before", "after")
	})
	launches.finish(t)

	for id, r := range replicas {
		if r.exited() {
			t.Errorf("replica %s exited (log in %s)", id, r.logPath)
		}
	}
	if !logHas(t, replicas[first], "campaigning again") {
		t.Errorf("the leader before the pause, %s, never reported losing the Lease: the pause did not exercise the loss", first)
	}
	t.Logf("after kube-apiserver resumed: %s held the Lease and led within %.1fs; its first NodeClaims for new pods after %.1fs (pause %s, Lease %s, renew deadline %s)",
		leader, elected.Seconds(), working.Seconds(), pause, operator.DefaultLeaseDuration, operator.DefaultRenewDeadline)
}

// waitLeader waits until exactly one replica leads: the Lease names it and was renewed after
// since, its process is alive, and it is the only replica whose leader_election_master_status is 1.
// It returns the leader's identity.
func waitLeader(t *testing.T, since time.Time, timeout time.Duration) string {
	t.Helper()
	var leader, last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		lease := &coordinationv1.Lease{}
		if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: operator.DefaultNamespace, Name: operator.LeaderElectionID}, lease); err != nil {
			last = "read the Lease: " + err.Error()
			return false, nil
		}
		holder := ptr.Deref(lease.Spec.HolderIdentity, "")
		r := replicas[holder]
		switch {
		case r == nil:
			last = fmt.Sprintf("the Lease is held by %q, not a replica", holder)
			return false, nil
		case lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(since):
			last = "the Lease was not renewed since " + since.Format(time.StampMilli)
			return false, nil
		case r.exited():
			t.Fatalf("the Lease names %s, whose process exited (log in %s)", holder, r.logPath)
		}
		var leading []string
		for id, r := range replicas {
			if masterStatus(r) == "1" {
				leading = append(leading, id)
			}
		}
		if len(leading) != 1 || leading[0] != holder {
			slices.Sort(leading)
			last = fmt.Sprintf("the Lease names %s, replicas reporting themselves leader: %v", holder, leading)
			return false, nil
		}
		leader = holder
		return true, nil
	})
	if err != nil {
		t.Fatalf("no single leader within %s: %s", timeout, last)
	}
	return leader
}

// masterStatus returns the value of leader_election_master_status{name="joiner"} the replica
// exports, or "" when it cannot be read.
func masterStatus(r *replica) string {
	return framework.LeaderStatus(r.metricsURL, operator.LeaderElectionID)
}

// claimSampler records every NodeClaim of some NodePools it ever sees, sampled every 200 ms, and
// the first time more exist than the pods need.
type claimSampler struct {
	want    map[string]int
	sampler *framework.Sampler
	mu      sync.Mutex
	seen    map[string]map[string]bool
}

func sampleNodeClaims(want map[string]int) *claimSampler {
	s := &claimSampler{want: want, seen: map[string]map[string]bool{}}
	for pool := range want {
		s.seen[pool] = map[string]bool{}
	}
	s.sampler = framework.Sample(func(ctx context.Context) string {
		list := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, list); err != nil {
			return "" // the apiserver is paused
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, nc := range list.Items {
			pool := nc.Labels[karpv1.NodePoolLabelKey]
			if names, ok := s.seen[pool]; ok {
				names[nc.Name] = true
				if len(names) > s.want[pool] {
					return fmt.Sprintf("NodePool %s: %d NodeClaims created for %d pods: %v", pool, len(names), s.want[pool], slices.Sorted(maps.Keys(names)))
				}
			}
		}
		return ""
	})
	return s
}

func (s *claimSampler) count(pool string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen[pool])
}

// finish stops sampling, fails on a NodeClaim launched twice and checks that every pod got one.
func (s *claimSampler) finish(t *testing.T) {
	t.Helper()
	s.sampler.Finish(t, "no NodeClaim launched twice for the same pods")
	for pool, n := range s.want {
		if got := s.count(pool); got != n {
			t.Errorf("NodePool %s: %d NodeClaims ever created, want %d", pool, got, n)
		}
	}
}

// nodesMatchClaims returns what is wrong with the NodeClaims and Nodes of the pools: "" when every
// live NodeClaim is initialized with exactly one Node and every Node has a NodeClaim.
func nodesMatchClaims(ctx context.Context, t *testing.T, pools ...string) string {
	var problems []string
	for _, pool := range pools {
		nodes := &corev1.NodeList{}
		if err := cluster.Client.List(ctx, nodes, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
			return "list nodes: " + err.Error()
		}
		byProviderID := map[string]int{}
		for _, n := range nodes.Items {
			byProviderID[n.Spec.ProviderID]++
		}
		claims := cluster.NodeClaims(t, pool)
		for _, nc := range claims {
			switch n := byProviderID[nc.Status.ProviderID]; {
			case nc.DeletionTimestamp != nil:
				problems = append(problems, "nodeclaim "+nc.Name+" terminating")
			case n != 1:
				problems = append(problems, fmt.Sprintf("nodeclaim %s has %d nodes", nc.Name, n))
			case !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized):
				problems = append(problems, "nodeclaim "+nc.Name+" not initialized")
			}
		}
		if len(nodes.Items) != len(claims) {
			problems = append(problems, fmt.Sprintf("NodePool %s: %d nodes for %d NodeClaims", pool, len(nodes.Items), len(claims)))
		}
	}
	return strings.Join(problems, "; ")
}

// ensureNodeClass creates the e2e LocalNodeClass and waits until the leader has made it Ready.
func ensureNodeClass(t *testing.T) {
	t.Helper()
	cluster.EnsureNodeClass(t)
	framework.Eventually(t, 60*time.Second, "LocalNodeClass ready", func(ctx context.Context) (bool, error) {
		nc := &joinerv1alpha1.LocalNodeClass{}
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: framework.NodeClassName}, nc); err != nil {
			return false, nil
		}
		return meta.IsStatusConditionTrue(nc.Status.Conditions, "Ready"), nil
	})
}

// createPods creates n pods (label app=pool) that select the NodePool pool, each asking for podCPU,
// and deletes them when the test ends. Bare pods, so that no controller of the paused control
// plane stands between the resume and the pending pods.
func createPods(t *testing.T, pool string, n int) {
	t.Helper()
	for i := range n {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", pool, i), Namespace: "default", Labels: map[string]string{"app": pool}},
			Spec: corev1.PodSpec{
				NodeSelector:                  map[string]string{karpv1.NodePoolLabelKey: pool},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(podCPU)}}}},
			},
		}
		if err := cluster.Client.Create(context.Background(), pod); err != nil {
			t.Fatalf("create pod %s: %v", pod.Name, err)
		}
		t.Cleanup(func() {
			if err := cluster.Client.Delete(context.Background(), pod); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete pod %s: %v", pod.Name, err)
			}
		})
	}
}

// logHas reports whether the replica's log has a line containing text.
func logHas(t *testing.T, r *replica, text string) bool {
	t.Helper()
	f, err := os.Open(r.logPath)
	if err != nil {
		t.Fatalf("open %s: %v", r.logPath, err)
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), text) {
			return true
		}
	}
	return false
}
