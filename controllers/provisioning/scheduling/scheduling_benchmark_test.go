package scheduling

import (
	"context"
	"fmt"
	"math"
	"math/rand"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// The benchmark workload of the scheduling benchmark reference (shared/reference/
// scheduling-benchmark.md §4): 400 synthetic instance types, one unlimited NodePool, and "diverse"
// pods drawn from math/rand seeded with 42, fresh for every size.

var (
	benchLabelValues = []string{"a", "b", "c", "d", "e", "f", "g"}
	benchCPU         = []int64{100, 250, 500, 1000, 1500}       // millicores
	benchMemory      = []int64{100, 256, 512, 1024, 2048, 4096} // MiB
)

// benchPods generates the pods of one size, drawing from rng exactly in the reference's order.
type benchPods struct {
	rng     *rand.Rand
	pods    []*corev1.Pod
	created time.Time
}

func (g *benchPods) pod(labels map[string]string, cpuIdx, memIdx int) *corev1.Pod {
	n := len(g.pods)
	labels["testing/cluster"] = "unspecified"
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              fmt.Sprintf("pod-%d", n),
			Namespace:         "default",
			UID:               types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", n)),
			Labels:            labels,
			CreationTimestamp: metav1.NewTime(g.created.Add(time.Duration(n))),
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "app",
			Image: "registry.invalid/app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewMilliQuantity(benchCPU[cpuIdx], resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(benchMemory[memIdx]<<20, resource.BinarySI),
			}},
		}}},
	}
	g.pods = append(g.pods, p)
	return p
}

func (g *benchPods) generic(count int) {
	for range count {
		label := benchLabelValues[g.rng.Intn(7)]
		c, m := g.rng.Intn(5), g.rng.Intn(6)
		g.pod(map[string]string{"my-label": label}, c, m)
	}
}

func (g *benchPods) spread(count int, key string) {
	for range count {
		label, selector := benchLabelValues[g.rng.Intn(7)], benchLabelValues[g.rng.Intn(7)]
		c, m := g.rng.Intn(5), g.rng.Intn(6)
		p := g.pod(map[string]string{"my-label": label}, c, m)
		p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       key,
			WhenUnsatisfiable: corev1.DoNotSchedule,
			LabelSelector:     &metav1.LabelSelector{MatchLabels: map[string]string{"my-label": selector}},
		}}
	}
}

func (g *benchPods) zoneAffinity(count int) {
	for range count {
		label := benchLabelValues[g.rng.Intn(7)]
		c, m := g.rng.Intn(5), g.rng.Intn(6)
		p := g.pod(map[string]string{"my-affininity": label}, c, m)
		p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"my-affininity": label}},
				TopologyKey:   karpv1.LabelTopologyZone,
			}},
		}}
	}
}

func (g *benchPods) hostnameAntiAffinity(count int) {
	for range count {
		c, m := g.rng.Intn(5), g.rng.Intn(6)
		p := g.pod(map[string]string{"app": "nginx"}, c, m)
		p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
				TopologyKey:   karpv1.LabelHostname,
			}},
		}}
	}
}

// makeDiversePods returns the reference's diverse workload of n pods for a fresh seed 42.
func makeDiversePods(n int) []*corev1.Pod {
	g := &benchPods{rng: rand.New(rand.NewSource(42)), created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	k := n / 5
	g.generic(k)
	g.spread(k, karpv1.LabelTopologyZone)
	g.spread(k, karpv1.LabelHostname)
	g.zoneAffinity(k)
	g.hostnameAntiAffinity(k)
	g.generic(n - 5*k)
	return g.pods
}

var benchInstanceTypes = fake.InstanceTypes(400)

func benchNodePool() *karpv1.NodePool {
	np := &karpv1.NodePool{}
	np.Name = "bench"
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "test.joiner.dev", Kind: "TestNodeClass", Name: "default"}
	np.Spec.Limits = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("10000000"),
		corev1.ResourceMemory: resource.MustParse("10000000Gi"),
	}
	return np
}

func benchInput(pods []*corev1.Pod) Input {
	np := benchNodePool()
	return Input{
		Pods:      pods,
		NodePools: []NodePool{{NodePool: np, InstanceTypes: benchInstanceTypes, Remaining: np.Spec.Limits}},
	}
}

// planCost is what the launch would pay for a plan: the cheapest compatible available offering
// of its cheapest option.
func planCost(p *NodeClaimPlan) float64 {
	best := math.Inf(1)
	for _, it := range p.InstanceTypeOptions {
		if o, ok := it.CheapestOffering(p.Requirements); ok && o.Price < best {
			best = o.Price
		}
	}
	return best
}

func totalCost(r *Results) float64 {
	sum := 0.0
	for _, p := range r.NewNodeClaims {
		sum += planCost(p)
	}
	return sum
}

// lowerBounds returns the reference's two cost bounds in $/h: LP, the price of covering total
// cpu, memory and pods with the best-value instance type in any fraction; and LP+, which also
// charges kubeReserved (100m, 10Mi) on the at least N/5 nodes the anti-affinity pods force and at
// least one unit (1 cpu, 2Gi: the smallest type) per node.
func lowerBounds(pods []*corev1.Pod, its []*cloudprovider.InstanceType) (lp, lpPlus float64) {
	var cpu, mem float64 // cores, GiB
	for _, p := range pods {
		r := resources.PodRequests(p)
		cpu += float64(r.Core[resources.CPU]) / 1000
		mem += float64(r.Core[resources.Memory]) / (1 << 30)
	}
	var cpuPer, memPer, podsPer float64
	for _, it := range its {
		price := it.Offerings.Cheapest().Price
		a := resources.Of(it.Allocatable())
		cpuPer = math.Max(cpuPer, float64(a.Core[resources.CPU])/1000/price)
		memPer = math.Max(memPer, float64(a.Core[resources.Memory])/(1<<30)/price)
		podsPer = math.Max(podsPer, float64(a.Core[resources.Pods])/price)
	}
	n := float64(len(pods))
	lp = math.Max(cpu/cpuPer, math.Max(mem/memPer, n/podsPer))
	nodes := math.Floor(n / 5)
	if n > 0 {
		nodes = math.Max(nodes, 1)
	}
	unit := its[0].Offerings.Cheapest().Price
	units := math.Max(math.Max(cpu+0.1*nodes, (mem+nodes*10.0/1024)/2), math.Max(n/10, nodes))
	return lp, units * unit
}

// prepareBench builds the Scheduler of a benchmark input, returning how long that took.
func prepareBench(b *testing.B, in Input) (*Scheduler, map[string]corev1.ResourceList, time.Duration) {
	start := time.Now()
	sch, err := Prepare(in.NodePools, in.DaemonSetPods, in.Options)
	took := time.Since(start)
	if err != nil {
		b.Fatal(err)
	}
	remaining := map[string]corev1.ResourceList{}
	for _, np := range in.NodePools {
		remaining[np.NodePool.Name] = np.Remaining
	}
	return sch, remaining, took
}

// BenchmarkScheduling measures Scheduler.Solve on the reference workload. Run it with -benchtime
// 1x; each iteration uses freshly generated pods (seed 42) and a freshly prepared Scheduler, both
// outside the timer, as the reference does with its scheduler. pods/s and B/pod count Solve
// alone; prepare-ms is the preparation (Prepare) per iteration, measured separately.
func BenchmarkScheduling(b *testing.B) {
	for _, n := range []int{1, 100, 1000, 5000, 20000, 50000} {
		b.Run(fmt.Sprintf("pods=%d", n), func(b *testing.B) {
			var elapsed, prepared time.Duration
			var allocated uint64
			var r *Results
			var pods []*corev1.Pod
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				pods = makeDiversePods(n)
				in := benchInput(pods)
				sch, remaining, took := prepareBench(b, in)
				prepared += took
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				start := time.Now()
				b.StartTimer()
				var err error
				r, err = sch.Solve(context.Background(), in.Pods, in.ExistingNodes, remaining)
				b.StopTimer()
				elapsed += time.Since(start)
				runtime.ReadMemStats(&after)
				allocated += after.TotalAlloc - before.TotalAlloc
				if err != nil || len(r.PodErrors) > 0 {
					b.Fatalf("solve: %v, %d unschedulable, first %v", err, len(r.PodErrors), r.PodErrors[0].Err)
				}
			}
			cost := totalCost(r)
			lp, lpPlus := lowerBounds(pods, benchInstanceTypes)
			b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds(), "pods/s")
			b.ReportMetric(float64(len(r.NewNodeClaims)), "nodes")
			b.ReportMetric(cost, "$/h")
			b.ReportMetric(cost/lp, "cost/LP")
			b.ReportMetric(cost/lpPlus, "cost/LP+")
			b.ReportMetric(float64(allocated)/float64(b.N)/float64(n), "B/pod")
			b.ReportMetric(prepared.Seconds()*1000/float64(b.N), "prepare-ms")
		})
	}
}

// TestBenchmarkWorkloadStream checks that the generator replays the reference's random stream:
// the reference gives the request counts and totals of the fresh-seed 1000 and 5000 pod
// workloads.
func TestBenchmarkWorkloadStream(t *testing.T) {
	totals := func(pods []*corev1.Pod) (cpu, memGiB float64, cpuCounts map[int64]int) {
		cpuCounts = map[int64]int{}
		for _, p := range pods {
			r := resources.PodRequests(p)
			cpuCounts[r.Core[resources.CPU]]++
			cpu += float64(r.Core[resources.CPU]) / 1000
			memGiB += float64(r.Core[resources.Memory]) / (1 << 30)
		}
		return cpu, memGiB, cpuCounts
	}
	cpu, mem, counts := totals(makeDiversePods(1000))
	want := map[int64]int{100: 181, 250: 237, 500: 194, 1000: 186, 1500: 202}
	for c, n := range want {
		if counts[c] != n {
			t.Errorf("1000 pods: %d pods of %dm cpu, want %d", counts[c], c, n)
		}
	}
	if math.Abs(cpu-663.35) > 1e-6 || math.Abs(mem-1309.65) > 0.01 {
		t.Errorf("1000 pods: Σcpu %.3f (want 663.35), Σmemory %.3f GiB (want 1309.65)", cpu, mem)
	}
	cpu, mem, _ = totals(makeDiversePods(5000))
	if math.Abs(cpu-3309.0) > 1e-6 || math.Abs(mem-6550.79) > 0.01 {
		t.Errorf("5000 pods: Σcpu %.3f (want 3309.0), Σmemory %.3f GiB (want 6550.79)", cpu, mem)
	}
}

// TestBenchmarkWorkloadSolution solves the 1000-pod benchmark workload and checks the solution
// from the final placement alone: every pod placed once, no node over its smallest option's
// allocatable, at most one app=nginx pod per node, every zone spread within its skew and every
// hostname spread within its skew (counting all pods, whatever order they are bound in), each
// self-affinity group in one zone, and a price within 5% of the LP+ lower bound.
func TestBenchmarkWorkloadSolution(t *testing.T) {
	pods := makeDiversePods(1000)
	r, err := Solve(context.Background(), benchInput(pods))
	if err != nil {
		t.Fatal(err)
	}
	for _, pe := range r.PodErrors {
		t.Errorf("unschedulable: %v", pe.Err)
	}
	if len(r.ExistingNodes) != 0 {
		t.Fatalf("placed pods on %d existing nodes, there are none", len(r.ExistingNodes))
	}
	at := checkWorkloadNodes(t, r)
	if len(at) != len(pods) {
		t.Fatalf("placed %d of %d pods", len(at), len(pods))
	}

	checkWorkloadTopology(t, pods, at)

	cost := totalCost(r)
	lp, lpPlus := lowerBounds(pods, benchInstanceTypes)
	t.Logf("%d nodes, $%.2f/h, LP $%.2f/h (×%.3f), LP+ $%.2f/h (×%.3f)", len(r.NewNodeClaims), cost, lp, cost/lp, lpPlus, cost/lpPlus)
	if cost > 1.05*lpPlus {
		t.Errorf("cost $%.2f/h is %.3f× the LP+ bound $%.2f/h, want at most 1.05×", cost, cost/lpPlus, lpPlus)
	}
	if math.Abs(lpPlus-215.08) > 0.01 || math.Abs(lp-208.84) > 0.01 {
		t.Errorf("bounds LP %.2f LP+ %.2f, the reference gives 208.84 and 215.08", lp, lpPlus)
	}
}

// workloadPlace is where TestBenchmarkWorkloadSolution found a pod: its NodeClaim and zone.
type workloadPlace struct {
	node int
	zone string
}

// checkWorkloadNodes checks each planned NodeClaim of the benchmark workload (pods placed once, at
// most one app=nginx pod, requests that sum its pods, options that fit them) and returns where
// each pod is.
func checkWorkloadNodes(t *testing.T, r *Results) map[*corev1.Pod]workloadPlace {
	t.Helper()
	at := map[*corev1.Pod]workloadPlace{}
	for i, nc := range r.NewNodeClaims {
		zone := ""
		if z, ok := nc.Requirements.Get(karpv1.LabelTopologyZone); ok {
			zone, _ = z.Single()
		}
		var sum resources.Vec
		nginx := 0
		for _, p := range nc.Pods {
			if _, dup := at[p]; dup {
				t.Fatalf("pod %s placed twice", p.Name)
			}
			at[p] = workloadPlace{i, zone}
			sum = sum.Plus(resources.PodRequests(p))
			if p.Labels["app"] == "nginx" {
				nginx++
			}
		}
		if nginx > 1 {
			t.Errorf("node %d holds %d app=nginx pods", i, nginx)
		}
		if got := resources.Of(nc.Requests); got.Core != sum.Core {
			t.Errorf("node %d requests %v, its pods sum to %v", i, got.Core, sum.Core)
		}
		if len(nc.InstanceTypeOptions) == 0 || len(nc.InstanceTypeOptions) > DefaultMaxInstanceTypes {
			t.Errorf("node %d has %d instance-type options", i, len(nc.InstanceTypeOptions))
		}
		for _, it := range nc.InstanceTypeOptions {
			a := resources.Of(it.Allocatable())
			if !resources.FitsCore(&sum, &resources.Vec{}, &a.Core) {
				t.Errorf("node %d: option %s (allocatable %v) is smaller than its pods %v", i, it.Name, a.Core, sum.Core)
			}
		}
	}
	return at
}

// checkWorkloadTopology checks the zone and hostname spreads and the self-affinity groups of the
// benchmark workload from where its pods are.
func checkWorkloadTopology(t *testing.T, pods []*corev1.Pod, at map[*corev1.Pod]workloadPlace) {
	t.Helper()
	zoneCount := map[string]map[string]int{} // my-label value -> zone -> pods
	nodeCount := map[int]map[string]int{}    // node -> my-label value -> pods
	affinityZones := map[string]map[string]bool{}
	for _, p := range pods {
		w := at[p]
		if v, ok := p.Labels["my-label"]; ok {
			if w.zone == "" {
				t.Errorf("pod %s is counted by zone spreads but its node has no single zone", p.Name)
			}
			if zoneCount[v] == nil {
				zoneCount[v] = map[string]int{}
			}
			zoneCount[v][w.zone]++
			if nodeCount[w.node] == nil {
				nodeCount[w.node] = map[string]int{}
			}
			nodeCount[w.node][v]++
		}
		if v, ok := p.Labels["my-affininity"]; ok {
			if affinityZones[v] == nil {
				affinityZones[v] = map[string]bool{}
			}
			affinityZones[v][w.zone] = true
		}
	}
	zones := []string{fake.Zone1, fake.Zone2, fake.Zone3}
	for _, p := range pods {
		for _, tsc := range p.Spec.TopologySpreadConstraints {
			sel := tsc.LabelSelector.MatchLabels["my-label"]
			w := at[p]
			switch tsc.TopologyKey {
			case karpv1.LabelTopologyZone:
				low := math.MaxInt
				for _, z := range zones {
					low = min(low, zoneCount[sel][z])
				}
				if skew := zoneCount[sel][w.zone] - low; skew > int(tsc.MaxSkew) {
					t.Errorf("pod %s: zone spread of my-label=%s has skew %d in %s", p.Name, sel, skew, w.zone)
				}
			case karpv1.LabelHostname:
				if n := nodeCount[w.node][sel]; n > int(tsc.MaxSkew) {
					t.Errorf("pod %s: node %d holds %d pods with my-label=%s", p.Name, w.node, n, sel)
				}
			}
		}
	}
	for v, zs := range affinityZones {
		if len(zs) != 1 || zs[""] {
			t.Errorf("self-affinity group my-affininity=%s spans zones %v", v, zs)
		}
	}
}

// makePreferencePods returns the reference's preference workload: n identical pods (100m,
// 4096Mi, the first draw of the seed-42 stream) labelled app=nginx, preferring zone 1 (weight 1),
// preferring no other app=nginx pod in their zone (weight 10, impossible after three pods) and on
// their node (weight 1).
func makePreferencePods(n int) []*corev1.Pod {
	g := &benchPods{rng: rand.New(rand.NewSource(42)), created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	for range n {
		p := g.pod(map[string]string{"app": "nginx"}, 0, 5)
		p.Spec.Affinity = &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{
				Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{fake.Zone1}},
				}},
			}}},
			PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{
				{Weight: 10, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: karpv1.LabelTopologyZone,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}}}},
				{Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: karpv1.LabelHostname,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}}}},
			}},
		}
	}
	return g.pods
}

// BenchmarkSchedulingPreferences measures the reference's 4000-pod preference workload under
// both preference policies (-benchtime 1x), preparing the Scheduler outside the timer like
// BenchmarkScheduling.
func BenchmarkSchedulingPreferences(b *testing.B) {
	for _, policy := range []PreferencePolicy{PreferencePolicyRespect, PreferencePolicyIgnore} {
		b.Run("policy="+string(policy), func(b *testing.B) {
			var elapsed, prepared time.Duration
			var r *Results
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				in := benchInput(makePreferencePods(4000))
				in.Options.PreferencePolicy = policy
				sch, remaining, took := prepareBench(b, in)
				prepared += took
				start := time.Now()
				b.StartTimer()
				r, _ = sch.Solve(context.Background(), in.Pods, in.ExistingNodes, remaining)
				b.StopTimer()
				elapsed += time.Since(start)
				if len(r.PodErrors) > 0 {
					b.Fatalf("%d unschedulable, first %v", len(r.PodErrors), r.PodErrors[0].Err)
				}
			}
			b.ReportMetric(4000*float64(b.N)/elapsed.Seconds(), "pods/s")
			b.ReportMetric(float64(len(r.NewNodeClaims)), "nodes")
			b.ReportMetric(totalCost(r), "$/h")
			b.ReportMetric(prepared.Seconds()*1000/float64(b.N), "prepare-ms")
		})
	}
}
