package expected_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
)

// defaultReplicas is the N of the scale-ups: at kube-controller-manager's default rate of about 20
// pods a second its pods take some 20 s to arrive, long enough for several provisioning rounds.
// JOINER_EXPECTED_REPLICAS sets another (the README's figures use 1,000).
const defaultReplicas = 400

// replicas is N.
func replicas(t *testing.T) int {
	t.Helper()
	v := os.Getenv("JOINER_EXPECTED_REPLICAS")
	if v == "" {
		return defaultReplicas
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 50 {
		t.Fatalf("JOINER_EXPECTED_REPLICAS=%q: want a number of at least 50", v)
	}
	return n
}

// pool creates a NodePool of on-demand c-family nodes of 2 to 32 vCPUs that removes empty nodes at
// once; mutate adjusts it.
func pool(t *testing.T, name string, mutate func(*karpv1.NodePool)) {
	t.Helper()
	cluster.NodePool(t, name, framework.OnDemandC("2", "4", "8", "16", "32"), func(np *karpv1.NodePool) {
		np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
		np.Spec.Disruption.ConsolidateAfter = karpv1.NewNillableDuration(0)
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
		if mutate != nil {
			mutate(np)
		}
	})
}

// inflate creates the Deployment name of n inflate-like pods (250m, 256Mi) on the NodePool name.
// When the test ends it scales it to zero and deletes its pods in one request, before the
// Deployment is deleted: kube-controller-manager would delete them at 20 a second.
func inflate(t *testing.T, name string, n int) {
	t.Helper()
	cluster.Deployment(t, name, name, int32(n), "250m", func(spec *corev1.PodSpec) {
		spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("256Mi")
	})
	t.Cleanup(func() {
		cluster.Scale(t, name, 0)
		if err := cluster.Client.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace("default"), client.MatchingLabels{"app": name},
			client.GracePeriodSeconds(0)); err != nil {
			t.Errorf("delete the pods of %s: %v", name, err)
		}
	})
}

// claimWatch records the names of every NodeClaim of a NodePool seen while it runs.
type claimWatch struct {
	mu      sync.Mutex
	names   map[string]bool
	sampler *framework.Sampler
}

func watchClaims(pool string) *claimWatch {
	w := &claimWatch{names: map[string]bool{}}
	w.sampler = framework.Sample(func(ctx context.Context) string {
		list := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
			return ""
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, nc := range list.Items {
			w.names[nc.Name] = true
		}
		return ""
	})
	return w
}

// launched stops the watch and returns how many NodeClaims it saw.
func (w *claimWatch) launched(t *testing.T) int {
	t.Helper()
	w.sampler.Finish(t, "watching NodeClaims")
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.names)
}

// outcome is what one scale-up landed on.
type outcome struct {
	// arrival is from the first pod's creation to the last's; running from the scale-up (or the
	// NodePool's release) to every pod Running.
	arrival, running time.Duration
	// launched counts the NodeClaims created; nodes the live ones when every pod ran, at cost $/h.
	launched, nodes int
	cost            float64
}

func (o outcome) String() string {
	return fmt.Sprintf("%d nodes, $%.3f/h, %d NodeClaims launched, pods arrived over %s, all Running after %s",
		o.nodes, o.cost, o.launched, o.arrival.Round(100*time.Millisecond), o.running.Round(100*time.Millisecond))
}

// scaleUp creates the NodePool and Deployment name with n pods and waits for them all to run.
// burst holds provisioning (the NodePool's cpu limit is zero) until every pod exists, then lifts
// the limit: the provisioner sees all n pods pending at once, as if they had been created in one
// burst.
func scaleUp(t *testing.T, name string, n int, burst bool) outcome {
	t.Helper()
	ctx := context.Background()
	pool(t, name, func(np *karpv1.NodePool) {
		if burst {
			np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0")}
		}
	})
	watch := watchClaims(name)
	start := time.Now()
	inflate(t, name, n)
	if burst {
		framework.Eventually(t, 3*time.Minute, fmt.Sprintf("%d pods of %s created", n, name), func(context.Context) (bool, error) {
			return len(cluster.Pods(t, name)) == n, nil
		})
		np := &karpv1.NodePool{}
		if err := cluster.Client.Get(ctx, types.NamespacedName{Name: name}, np); err != nil {
			t.Fatal(err)
		}
		orig := np.DeepCopy()
		np.Spec.Limits = nil
		if err := cluster.Client.Patch(ctx, np, client.MergeFrom(orig)); err != nil {
			t.Fatalf("lift the limit of NodePool %s: %v", name, err)
		}
		start = time.Now()
	}
	pods := cluster.WaitRunning(t, name, n, 4*time.Minute)
	o := outcome{running: time.Since(start)}
	first, last := pods[0].CreationTimestamp.Time, pods[0].CreationTimestamp.Time
	for _, p := range pods {
		first, last = minTime(first, p.CreationTimestamp.Time), maxTime(last, p.CreationTimestamp.Time)
	}
	o.arrival = last.Sub(first)
	claims := framework.Live(cluster.NodeClaims(t, name))
	o.nodes, o.cost = len(claims), cost(t, name, claims)
	o.launched = watch.launched(t)
	return o
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// cost is the hourly price of the NodeClaims' launched offerings, from the local provider's
// catalog for the NodePool.
func cost(t *testing.T, pool string, claims []karpv1.NodeClaim) float64 {
	t.Helper()
	np := &karpv1.NodePool{}
	if err := cluster.Client.Get(context.Background(), types.NamespacedName{Name: pool}, np); err != nil {
		t.Fatal(err)
	}
	its, err := cluster.Joiner.Operator.CloudProvider.GetInstanceTypes(context.Background(), np)
	if err != nil {
		t.Fatalf("instance types of %s: %v", pool, err)
	}
	total := 0.0
	for _, nc := range claims {
		l := nc.Labels
		price := -1.0
		for _, it := range its {
			if it.Name != l[corev1.LabelInstanceTypeStable] {
				continue
			}
			for _, o := range it.Offerings {
				if o.Zone() == l[corev1.LabelTopologyZone] && o.CapacityType() == l[karpv1.CapacityTypeLabelKey] {
					price = o.Price
				}
			}
		}
		if price < 0 {
			t.Fatalf("NodeClaim %s: no price for %s in %s (%s)", nc.Name, l[corev1.LabelInstanceTypeStable], l[corev1.LabelTopologyZone], l[karpv1.CapacityTypeLabelKey])
		}
		total += price
	}
	return total
}

// TestPodsArrivingSlowly scales a Deployment to N three ways and compares what each lands on:
// every pod pending at once (the reference), pods arriving at kube-controller-manager's default
// rate with the PlanForExpectedPods gate off, and the same with the gate on. With the gate on it
// must land on the reference's node count ±1 and at most 1.2 × its $/h, and launch no more
// NodeClaims than that (consolidation removing the nodes launched for the pods still coming would
// make it launch them again).
func TestPodsArrivingSlowly(t *testing.T) {
	n := replicas(t)
	results := map[string]outcome{}
	for _, tc := range []struct {
		name  string
		gate  bool
		burst bool
	}{
		{name: "all-at-once", burst: true},
		{name: "slow-gate-off"},
		{name: "slow-gate-on", gate: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			useGate(t, tc.gate)
			results[tc.name] = scaleUp(t, tc.name, n, tc.burst)
			t.Logf("%s, N=%d: %s", tc.name, n, results[tc.name])
		})
	}
	ref, on, ok := results["all-at-once"], results["slow-gate-on"], len(results) == 3
	if !ok {
		t.Fatalf("not every scale-up ran: %v", results)
	}
	for _, name := range []string{"all-at-once", "slow-gate-off", "slow-gate-on"} {
		r := results[name]
		t.Logf("N=%d %-14s %3d nodes (%.2f× all-at-once) $%.3f/h (%.2f×) launched %d, arrival %s",
			n, name, r.nodes, float64(r.nodes)/float64(ref.nodes), r.cost, r.cost/ref.cost, r.launched, r.arrival.Round(100*time.Millisecond))
	}
	if on.nodes > ref.nodes+1 || on.nodes < ref.nodes-1 {
		t.Errorf("gate on: %d nodes, want all-at-once's %d ± 1", on.nodes, ref.nodes)
	}
	if on.cost > 1.2*ref.cost {
		t.Errorf("gate on: $%.3f/h, want at most 1.2 × all-at-once's $%.3f/h", on.cost, ref.cost)
	}
	if on.launched > ref.nodes+1 {
		t.Errorf("gate on: %d NodeClaims launched, want at most all-at-once's %d nodes + 1", on.launched, ref.nodes)
	}
}

// TestScaleDownBeforePodsExist scales a Deployment to N with the gate on, waits for the first
// round to launch capacity for all N, and scales it down to a few pods while most do not exist
// yet: nothing is launched once the ReplicaSet's smaller count is visible, and the nodes launched
// for the cancelled pods go (emptiness), leaving about what the remaining pods need.
func TestScaleDownBeforePodsExist(t *testing.T) {
	const keep = 20
	n := replicas(t)
	useGate(t, true)
	pool(t, "shrink", nil)
	inflate(t, "shrink", n)
	framework.Eventually(t, 2*time.Minute, "the first NodeClaims of shrink", func(context.Context) (bool, error) {
		return len(cluster.NodeClaims(t, "shrink")) > 0, nil
	})
	early := len(cluster.Pods(t, "shrink"))
	cluster.Scale(t, "shrink", keep)
	var scaled time.Time
	framework.Eventually(t, time.Minute, "the ReplicaSet of shrink scaled down", func(ctx context.Context) (bool, error) {
		list := &appsv1.ReplicaSetList{}
		if err := cluster.Client.List(ctx, list, client.InNamespace("default"), client.MatchingLabels{"app": "shrink"}); err != nil {
			return false, nil
		}
		scaled = time.Now()
		return len(list.Items) == 1 && list.Items[0].Spec.Replicas != nil && *list.Items[0].Spec.Replicas == keep, nil
	})
	t.Logf("scaled to %d when %d of %d pods existed and %d NodeClaims were launched", keep, early, n, len(cluster.NodeClaims(t, "shrink")))
	// The first round comes when the batch closes, 10 s into the arrival (about 200 pods at 20 a
	// second), and plans for all N: most of the pods it planned for must not exist yet.
	if early > 3*n/4 {
		t.Fatalf("%d of %d pods existed before the scale-down: the test did not scale down before the pods existed", early, n)
	}
	cluster.WaitRunning(t, "shrink", keep, 2*time.Minute)
	// A round that read the cluster before the scale-down may still be creating its NodeClaims.
	grace := scaled.Add(5 * time.Second)
	framework.Hold(t, 15*time.Second, "nothing launched after the scale-down", func(context.Context) string {
		for _, nc := range cluster.NodeClaims(t, "shrink") {
			if nc.CreationTimestamp.After(grace) {
				return fmt.Sprintf("NodeClaim %s created at %s, after the scale-down at %s", nc.Name, nc.CreationTimestamp.Format(time.RFC3339), scaled.Format(time.RFC3339))
			}
		}
		return ""
	})
	// 20 pods of 250m fit one node; the nodes launched for the cancelled pods are empty and go.
	framework.Eventually(t, 2*time.Minute, "the nodes of the cancelled pods removed", func(context.Context) (bool, error) {
		return len(framework.Live(cluster.NodeClaims(t, "shrink"))) <= 2, nil
	})
}
