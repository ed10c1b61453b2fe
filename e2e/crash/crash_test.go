package crash_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
)

// convergeWithin is the target of the crash probe: after a restart, every pod runs and nothing
// is orphaned within this time.
const convergeWithin = 30 * time.Second

// schedulerMaxBackoff is kube-scheduler's default podMaxBackoffSeconds: a pod it found
// unschedulable while its node registered may wait this long after the node is Ready.
const schedulerMaxBackoff = 10 * time.Second

// TestCrashDuringLaunch kills Joiner with SIGKILL at 0.5 s, 1.5 s and 3 s into a 10-pod launch,
// with instances that register at once and 20 s after launch, starts it again at once and
// requires, within convergeWithin of the restart: the 10 pods Running, every NodeClaim of the
// NodePool with its Node and every Node with its NodeClaim (no leaked node), and no two Nodes
// for one NodeClaim (no duplicate). After convergence it keeps checking until every instance
// launched before the crash would have registered, so that a late Node of a lost launch counts.
func TestCrashDuringLaunch(t *testing.T) {
	for _, delay := range []time.Duration{0, 20 * time.Second} {
		class := fmt.Sprintf("crash-%ds", int(delay.Seconds()))
		createNodeClass(t, class, delay)
		for _, killAt := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second} {
			name := fmt.Sprintf("%s-kill-%dms", class, killAt.Milliseconds())
			t.Run(name, func(t *testing.T) {
				probe(t, name, class, delay, killAt)
			})
		}
	}
}

func createNodeClass(t *testing.T, name string, delay time.Duration) {
	t.Helper()
	nc := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: joinerv1alpha1.LocalNodeClassSpec{Region: "us-east-1", NodeRegistrationDelay: &metav1.Duration{Duration: delay}}}
	if err := cluster.Client.Create(context.Background(), nc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create LocalNodeClass %s: %v", name, err)
	}
	framework.Eventually(t, 30*time.Second, "LocalNodeClass "+name+" ready", func(ctx context.Context) (bool, error) {
		got := &joinerv1alpha1.LocalNodeClass{}
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: name}, got); err != nil {
			return false, nil
		}
		for _, c := range got.Status.Conditions {
			if c.Type == "Ready" {
				return c.Status == metav1.ConditionTrue, nil
			}
		}
		return false, nil
	})
}

func probe(t *testing.T, name, class string, delay, killAt time.Duration) {
	cluster.NodePool(t, name, framework.OnDemandC("2", "4"), func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef.Name = class
		// Only the crash is under test: nothing is consolidated away meanwhile.
		np.Spec.Disruption.ConsolidateAfter = karpv1.NeverDuration()
	})
	launchStart := time.Now()
	cluster.Deployment(t, name, name, 10, "1", nil)
	// The probe kills Joiner at a chosen moment of the launch, whatever it is doing then.
	<-time.After(time.Until(launchStart.Add(killAt)))
	joiner.kill()
	restart := time.Now()
	var err error
	if joiner, err = startJoiner(context.Background(), cluster.Env); err != nil {
		t.Fatalf("restart Joiner: %v", err)
	}
	ready := time.Now()

	// Joiner's part (every NodeClaim with its Node, initialized, nothing leaked or duplicated)
	// must be done within convergeWithin; the pods then wait for kube-scheduler, whose backoff of
	// pods it found unschedulable reaches schedulerMaxBackoff while the nodes register.
	var nodesDone, podsDone time.Time
	var last string
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Until(restart.Add(convergeWithin+schedulerMaxBackoff)), true,
		func(context.Context) (bool, error) {
			nodes, pods := state(t, name, 10)
			now := time.Now()
			if nodes == "" && nodesDone.IsZero() {
				nodesDone = now
			}
			last = strings.Trim(nodes+"; "+pods, "; ")
			if last == "" {
				podsDone = now
			}
			return last == "", nil
		})
	if err != nil {
		t.Fatalf("not converged within %s of the restart (killed %s into the launch, registration delay %s): %s",
			convergeWithin+schedulerMaxBackoff, killAt, delay, last)
	}
	t.Logf("killed %s into the launch, registration delay %s: Joiner ready %.1fs, nodes converged %.1fs, pods Running %.1fs after the restart (%s)",
		killAt, delay, ready.Sub(restart).Seconds(), nodesDone.Sub(restart).Seconds(), podsDone.Sub(restart).Seconds(), summary(t, name))
	if nodesDone.Sub(restart) > convergeWithin {
		t.Errorf("nodes converged %.1fs after the restart, over the target of %s", nodesDone.Sub(restart).Seconds(), convergeWithin)
	}
	if delay == 0 && podsDone.Sub(restart) > convergeWithin {
		t.Errorf("pods Running %.1fs after the restart, over the target of %s", podsDone.Sub(restart).Seconds(), convergeWithin)
	}
	// A launch the crash lost may still create its Node until the registration delay has passed
	// since the kill: keep checking until then.
	framework.Hold(t, time.Until(restart.Add(delay+5*time.Second)), "nothing leaked or duplicated after convergence", func(context.Context) string {
		nodes, pods := state(t, name, 10)
		return strings.Trim(nodes+"; "+pods, "; ")
	})
}

// state returns what is still wrong with the NodeClaims and Nodes of the pool ("" when every
// NodeClaim has exactly one Node and is initialized, and every Node has a NodeClaim) and with its
// pods ("" when all want of them run).
func state(t *testing.T, pool string, want int) (claimsAndNodes, pods string) {
	t.Helper()
	ctx := context.Background()
	running := 0
	for _, p := range cluster.Pods(t, pool) {
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	if running != want {
		pods = fmt.Sprintf("pods running %d of %d", running, want)
	}
	var problems []string
	claims := cluster.NodeClaims(t, pool)
	nodeList := &corev1.NodeList{}
	if err := cluster.Client.List(ctx, nodeList, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return "list nodes: " + err.Error(), pods
	}
	byProviderID := map[string][]string{}
	for _, n := range nodeList.Items {
		byProviderID[n.Spec.ProviderID] = append(byProviderID[n.Spec.ProviderID], n.Name)
	}
	claimed := map[string]bool{}
	for _, nc := range claims {
		pid := nc.Status.ProviderID
		if nc.DeletionTimestamp != nil {
			problems = append(problems, "nodeclaim "+nc.Name+" terminating")
			continue
		}
		switch n := len(byProviderID[pid]); {
		case pid == "":
			problems = append(problems, "nodeclaim "+nc.Name+" not launched")
		case n == 0:
			problems = append(problems, "nodeclaim "+nc.Name+" without a node")
		case n > 1:
			problems = append(problems, fmt.Sprintf("nodeclaim %s duplicated: nodes %v", nc.Name, byProviderID[pid]))
		case !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized):
			problems = append(problems, "nodeclaim "+nc.Name+" not initialized")
		}
		claimed[pid] = true
	}
	for pid, names := range byProviderID {
		if !claimed[pid] {
			problems = append(problems, fmt.Sprintf("leaked node %v (%s) without a nodeclaim", names, pid))
		}
	}
	sort.Strings(problems)
	return strings.Join(problems, "; "), pods
}

func summary(t *testing.T, pool string) string {
	claims := cluster.NodeClaims(t, pool)
	types := map[string]int{}
	for _, nc := range claims {
		types[nc.Labels[corev1.LabelInstanceTypeStable]]++
	}
	return fmt.Sprintf("%d nodeclaims %v", len(claims), types)
}
