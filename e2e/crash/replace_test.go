package crash_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
)

// replaceRegistrationDelay is how long the instances of the replacement probe take to register:
// the window in which a replacement is launched but has no Node yet.
const replaceRegistrationDelay = 8 * time.Second

// killPoint is a moment of a replace, before its replacement initializes, at which the probe kills
// Joiner.
type killPoint struct {
	name string
	// reached reports whether the command on the candidate NodeClaim, whose replacements (the
	// NodeClaims annotated as replacements) are given, is at that moment.
	reached func(candidate *karpv1.NodeClaim, replacements []karpv1.NodeClaim) bool
}

// TestCrashDuringReplacementLaunch kills Joiner with SIGKILL during a consolidation replace, before
// the replacement initializes: as soon as the candidate is marked by the command (the replacement
// being created, or not yet: the two are a few requests apart), and once the replacement is
// launched but its Node has not registered. It starts Joiner again at once and requires, within
// convergeWithin + schedulerMaxBackoff of the restart: the command completed (only a small node is
// left, the candidate drained through the queue) or rolled back (only the candidate, unmarked), the
// pod Running, every NodeClaim with its one Node and every Node with its NodeClaim, no node tainted
// disrupted; and, sampled throughout, that the candidate is never deleted before a replacement has
// initialized, so its pod always has a node to go to.
func TestCrashDuringReplacementLaunch(t *testing.T) {
	const class = "crash-replace"
	createNodeClass(t, class, replaceRegistrationDelay)
	for _, kill := range []killPoint{
		{name: "marked", reached: func(candidate *karpv1.NodeClaim, _ []karpv1.NodeClaim) bool {
			return candidate.Annotations[karpv1.DisruptionCommandAnnotationKey] != ""
		}},
		{name: "launched", reached: func(_ *karpv1.NodeClaim, replacements []karpv1.NodeClaim) bool {
			return len(replacements) > 0 && replacements[0].Status.ProviderID != ""
		}},
	} {
		t.Run(kill.name, func(t *testing.T) {
			replaceProbe(t, "crash-replace-"+kill.name, class, kill)
		})
	}
}

// replaceProbe runs one replace on a NodePool name of the class, kills Joiner at the kill point,
// restarts it and checks what TestCrashDuringReplacementLaunch requires.
func replaceProbe(t *testing.T, name, class string, kill killPoint) {
	candidate := oversizedNode(t, name, class)
	keptPod := framework.Sample(candidateWaitsForReplacement(name, candidate))
	sampled := false
	finish := func() {
		if !sampled {
			sampled = true
			keptPod.Finish(t, "the candidate keeps its pod until a replacement initializes")
		}
	}
	t.Cleanup(finish) // also when a wait below fails
	// Once 4-vCPU nodes are allowed, one replaces the 16-vCPU node of the 3-CPU pod.
	allowCPUs(t, name, "4", "16")
	replacements := waitForKillPoint(t, name, candidate, kill)
	joiner.kill()
	restart := time.Now()
	var atKill []string
	for _, r := range replacements {
		if r.Status.NodeName != "" {
			t.Fatalf("the replacement %s had registered Node %s when Joiner was killed: the probe missed its moment", r.Name, r.Status.NodeName)
		}
		atKill = append(atKill, fmt.Sprintf("%s (provider ID %q, no Node)", r.Name, r.Status.ProviderID))
	}
	var err error
	if joiner, err = startJoiner(context.Background(), cluster.Env); err != nil {
		t.Fatalf("restart Joiner: %v", err)
	}
	ready := time.Now()

	var last string
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Until(restart.Add(convergeWithin+schedulerMaxBackoff)), true,
		func(context.Context) (bool, error) {
			last = settled(t, name)
			return last == "", nil
		})
	if err != nil {
		t.Fatalf("not settled within %s of the restart (killed when the candidate was %s, replacements then %v): %s", convergeWithin+schedulerMaxBackoff, kill.name, atKill, last)
	}
	done := time.Now()
	finish()
	left := cluster.NodeClaims(t, name)[0]
	outcome := "completed"
	if left.Name == candidate {
		outcome = "rolled back"
	} else if !cluster.HasEvent(t, candidate, "DisruptionTerminating", string(karpv1.DisruptionReasonUnderutilized)) {
		t.Errorf("the candidate %s is gone but was not disrupted through the queue", candidate)
	}
	t.Logf("crash during a replace, killed at %s (replacements then: %v): command %s; Joiner ready %.1fs, settled %.1fs after the restart, NodeClaim left %s",
		kill.name, atKill, outcome, ready.Sub(restart).Seconds(), done.Sub(restart).Seconds(), left.Name)
	// An instance the crash lost could still create its Node until the registration delay has
	// passed since the kill: keep checking until then.
	framework.Hold(t, time.Until(restart.Add(replaceRegistrationDelay+5*time.Second)), "nothing leaked after the replace settled", func(context.Context) string {
		return settled(t, name)
	})
}

// oversizedNode creates the NodePool name of the class, on 16-vCPU nodes, consolidating after 5 s,
// with one 3-CPU pod, and returns the name of the NodeClaim the pod runs on.
func oversizedNode(t *testing.T, name, class string) string {
	t.Helper()
	cluster.NodePool(t, name, framework.OnDemandC("16"), func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.NodeClassRef.Name = class
		np.Spec.Disruption.ConsolidateAfter = karpv1.NewNillableDuration(5 * time.Second)
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	})
	cluster.Deployment(t, name, name, 1, "3", nil)
	cluster.WaitRunning(t, name, 1, 2*time.Minute)
	claims := framework.Live(cluster.NodeClaims(t, name))
	if len(claims) != 1 {
		t.Fatalf("want one 16-vCPU node for one 3-CPU pod, got %d NodeClaims", len(claims))
	}
	return claims[0].Name
}

// allowCPUs sets the vCPU counts the NodePool name allows.
func allowCPUs(t *testing.T, name string, cpus ...string) {
	t.Helper()
	ctx := context.Background()
	np := &karpv1.NodePool{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Name: name}, np); err != nil {
		t.Fatalf("get NodePool %s: %v", name, err)
	}
	orig := np.DeepCopy()
	for i, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == awsv1.LabelInstanceCPU {
			np.Spec.Template.Spec.Requirements[i].Values = cpus
		}
	}
	if err := cluster.Client.Patch(ctx, np, client.MergeFrom(orig)); err != nil {
		t.Fatalf("allow %v vCPUs in NodePool %s: %v", cpus, name, err)
	}
}

// waitForKillPoint polls the NodePool's NodeClaims every 20 ms until the command on the candidate
// has reached the kill point, and returns its replacements as seen then.
func waitForKillPoint(t *testing.T, pool, candidate string, kill killPoint) []karpv1.NodeClaim {
	t.Helper()
	var replacements []karpv1.NodeClaim
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
			return false, nil
		}
		var cand *karpv1.NodeClaim
		replacements = nil
		for i := range list.Items {
			switch nc := &list.Items[i]; {
			case nc.Name == candidate:
				cand = nc
			case nc.Annotations[karpv1.DisruptionReplacementForAnnotationKey] != "":
				replacements = append(replacements, *nc)
			}
		}
		return cand != nil && kill.reached(cand, replacements), nil
	})
	if err != nil {
		t.Fatalf("the replace of %s not %s within a minute: %v", candidate, kill.name, err)
	}
	return replacements
}

// candidateWaitsForReplacement is the invariant that no pod is lost: the candidate NodeClaim is not
// deleted (drained) before some other NodeClaim of the pool has initialized.
func candidateWaitsForReplacement(pool, candidate string) func(ctx context.Context) string {
	initialized := false
	return func(ctx context.Context) string {
		list := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
			return ""
		}
		for _, nc := range list.Items {
			if nc.Name != candidate && meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
				initialized = true
			}
		}
		i := slices.IndexFunc(list.Items, func(nc karpv1.NodeClaim) bool { return nc.Name == candidate })
		if !initialized && (i < 0 || list.Items[i].DeletionTimestamp != nil) {
			return fmt.Sprintf("the candidate %s was deleted before any replacement initialized", candidate)
		}
		return ""
	}
}

// settled returns what is still wrong with the pool after a replace ("" when it has exactly one
// NodeClaim, which no command holds, with its one initialized Node, no Node without a NodeClaim,
// no Node tainted disrupted, and its one pod Running).
func settled(t *testing.T, pool string) string {
	t.Helper()
	nodes, pods := state(t, pool, 1)
	problems := []string{nodes, pods}
	claims := cluster.NodeClaims(t, pool)
	if len(claims) != 1 {
		problems = append(problems, fmt.Sprintf("%d nodeclaims", len(claims)))
	}
	if n := framework.Disrupting(claims); n > 0 {
		problems = append(problems, fmt.Sprintf("%d nodeclaims held by a command", n))
	}
	nodeList := &corev1.NodeList{}
	if err := cluster.Client.List(context.Background(), nodeList, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return "list nodes: " + err.Error()
	}
	for _, n := range nodeList.Items {
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.DisruptedTaintKey }) {
			problems = append(problems, "node "+n.Name+" tainted disrupted")
		}
	}
	problems = slices.DeleteFunc(problems, func(s string) bool { return s == "" })
	return strings.Join(problems, "; ")
}
