package planner_test

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/requirements"
	"github.com/joiner-dev/joiner/testsupport/catalogbench"
)

// BenchmarkConsolidation measures consolidation on the proposed workload of the disruption
// reference (shared/reference/disruption.md §6.2, harness A, the "fragmented" pattern, one
// NodePool, budget 100%, WhenEmptyOrUnderutilized).
//
// Run it with -benchtime 1x, one size at a time (sub-benchmark names are regular expressions
// matched without anchors, so anchor the size):
//
//	GOMAXPROCS=2 go test -run '^$' -bench 'BenchmarkConsolidation/^nodes=100$/' -benchtime 1x ./controllers/disruption/planner/
//
// Setup, outside the timer and done once per size:
//   - Instance types: the embedded EC2 catalog through the local provider (us-east-1, all zones).
//     The NodePool "default" allows amd64, on-demand only (so spot-to-spot never comes into
//     play and every price is a fixed catalog price) and instance categories c, m and r; it
//     consolidates WhenEmptyOrUnderutilized after 0s with a budget of 100% of nodes and no limits.
//     No DaemonSets.
//   - Pods: the scheduling benchmark's "generic" size mix (cpu {100m, 250m, 500m, 1, 1.5} and
//     memory {100Mi, 256Mi, 512Mi, 1Gi, 2Gi, 4Gi}, uniform, math/rand seed 42, drawn in that
//     benchmark's order), no topology constraints, each owned by one of 50 ReplicaSets.
//   - Provisioning: scheduling.Solve with no existing node places the pods; the pod count grows
//     until Solve opens at least N NodeClaims (nodes-before reports the real count). Each plan
//     becomes an initialized, consolidatable node through planner.LaunchNode.
//   - Thinning: a seeded uniform random subset of keep% of the pods stays (the worst case for
//     single-node consolidation); nodes keep their place, some become empty.
//
// Measured (each iteration): passes of Planner.Plan, each command applied with planner.Apply, until
// a pass returns no command (at most benchMaxPasses). Cluster.Now does not move between passes,
// as in Planner.DryRun, so the replacements a command launches stay within the churn guard's
// cooldown; when a pass finds nothing, the clock moves past the cooldown (as real time would
// between passes) and the run converges only when a pass finds nothing then too (cooldowns counts
// these waits). ns/op is the whole convergence (Plan and Apply); pass-*-ms time Plan alone.
// Timeouts are 10 minutes so that results do not depend on the machine's speed.
//
// Two flags of the test binary (after -args) help with the large sizes: -consolidation.v prints
// every pass to stderr as it completes, and -consolidation.passes=K stops each convergence after K
// passes, reporting converged 0, instead of running to the end. Plan calls run under the pprof
// label phase=plan, so that -tagfocus leaves the setup (the calibration solves) out of a profile:
//
//	GOMAXPROCS=2 go test -run '^$' -bench 'BenchmarkConsolidation/^nodes=5000$/^keep=75$' -benchtime 1x \
//		-cpuprofile /tmp/cons.prof ./controllers/disruption/planner/ -args -consolidation.v -consolidation.passes=45
//	go tool pprof -top -cum -tagfocus phase=plan /tmp/cons.prof
//
// Reaching benchMaxPasses fails the sub-benchmark; the failure message gives the figures reached.
//
// Reported: pass-p50-ms, pass-p95-ms and pass-max-ms (over every Plan call of every iteration),
// passes (Plan calls, the last one finding nothing), cooldowns, commands, and by type cmd-empty, cmd-multi and
// cmd-single, replacements (NodeClaims launched), evicted (the candidates' reschedulable pods,
// summed over commands), nodes-before and nodes-after, cost-before and cost-after ($/h of every
// node at its offering's on-demand catalog price), LP ($/h, the lower bound below, of the pods
// left), before/LP and after/LP, timeouts (methods that ran out of time), pods, and converged (1
// when the last pass found nothing).
//
// LP bound (shared/reference/scheduling-benchmark.md §5): the least $/h of real-valued counts of
// the allowed instance types, each at its cheapest on-demand offering, whose allocatable cpu,
// memory and pods together cover the pods' totals, solved exactly (catalogbench.CoveringLP, by
// the simplex method). Types dominated by a single other type (no cheaper and no smaller in any
// resource) are dropped first.
//
// The sub-benchmarks packed run the same convergence on the freshly provisioned cluster (keep
// 100%): a well-packed cluster should give commands = 0.
func BenchmarkConsolidation(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			for _, keep := range []int{75, 50, 25} {
				b.Run(fmt.Sprintf("keep=%d", keep), func(b *testing.B) { benchConverge(b, n, keep) })
			}
			b.Run("packed", func(b *testing.B) { benchConverge(b, n, 100) })
		})
	}
}

// benchPasses, when positive, stops every convergence after that many passes and reports what
// it has (converged 0) instead of failing: for profiling the first passes of the large sizes.
var benchPasses = flag.Int("consolidation.passes", 0, "stop BenchmarkConsolidation after this many passes (0: run to convergence)")

// benchVerbose prints every pass to stderr as it completes, to follow the large sizes.
var benchVerbose = flag.Bool("consolidation.v", false, "print every BenchmarkConsolidation pass to stderr")

const (
	// benchMaxPasses caps a convergence; reaching it fails the sub-benchmark.
	benchMaxPasses = 200
	// benchDeployments is how many ReplicaSets own the pods.
	benchDeployments = 50
	benchNodePool    = "default"
)

var benchNow = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

func benchConverge(b *testing.B, n, keep int) {
	env := loadBenchEnv(b)
	prov := env.provisioned(b, n)
	c := env.thin(prov, keep)
	lp := env.lowerBound(allPods(c))
	p := planner.New(planner.Options{MultiNodeTimeout: 10 * time.Minute, SingleNodeTimeout: 10 * time.Minute}, nil)
	ctx := context.Background()
	var durations []time.Duration
	var last convergence
	var failure error
	b.ResetTimer()
	for i := 0; i < b.N && failure == nil; i++ {
		conv, err := converge(ctx, p, c)
		if conv.final == nil {
			b.Fatal(err)
		}
		durations = append(durations, conv.durations...)
		last, failure = conv, err
	}
	b.StopTimer()
	slices.Sort(durations)
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 }
	before, after := env.cost(c), env.cost(last.final)
	converged := 0.0
	if last.converged {
		converged = 1
	}
	metrics := []struct {
		value float64
		unit  string
	}{
		{ms(percentile(durations, 0.50)), "pass-p50-ms"},
		{ms(percentile(durations, 0.95)), "pass-p95-ms"},
		{ms(durations[len(durations)-1]), "pass-max-ms"},
		{float64(len(last.durations)), "passes"},
		{float64(last.cooldowns), "cooldowns"},
		{float64(last.commands), "commands"},
		{float64(last.byType[planner.TypeEmpty]), "cmd-empty"},
		{float64(last.byType[planner.TypeMulti]), "cmd-multi"},
		{float64(last.byType[planner.TypeSingle]), "cmd-single"},
		{float64(last.replacements), "replacements"},
		{float64(last.evicted), "evicted"},
		{float64(len(c.Nodes)), "nodes-before"},
		{float64(len(last.final.Nodes)), "nodes-after"},
		{before, "cost-before"},
		{after, "cost-after"},
		{lp, "LP"},
		{before / lp, "before/LP"},
		{after / lp, "after/LP"},
		{float64(last.timeouts), "timeouts"},
		{float64(len(allPods(c))), "pods"},
		{converged, "converged"},
	}
	if failure != nil {
		// A failed benchmark prints no result line: log the figures reached so far.
		var text []string
		for _, m := range metrics {
			text = append(text, fmt.Sprintf("%s=%.4g", m.unit, m.value))
		}
		b.Fatalf("%v; so far: %s", failure, strings.Join(text, " "))
	}
	for _, m := range metrics {
		b.ReportMetric(m.value, m.unit)
	}
	if got := len(allPods(last.final)); got != len(allPods(c)) {
		b.Fatalf("%d pods before consolidation, %d after", len(allPods(c)), got)
	}
}

// convergence is the outcome of running passes until nothing is left to do.
type convergence struct {
	durations                                            []time.Duration
	commands, replacements, evicted, timeouts, cooldowns int
	byType                                               map[string]int
	final                                                *planner.Cluster
	converged                                            bool
}

func converge(ctx context.Context, p *planner.Planner, c *planner.Cluster) (convergence, error) {
	out := convergence{byType: map[string]int{}}
	waited := false // the last pass found nothing and the clock has moved past the cooldown since
	for pass := 0; ; pass++ {
		if *benchPasses > 0 && pass == *benchPasses {
			out.final = c
			return out, nil
		}
		if pass == benchMaxPasses {
			out.final = c
			return out, fmt.Errorf("no convergence after %d passes (%d commands)", benchMaxPasses, out.commands)
		}
		var pl *planner.Plan
		var err error
		start := time.Now()
		// The label lets a CPU profile focus on the passes: go tool pprof -tagfocus phase=plan.
		pprof.Do(ctx, pprof.Labels("phase", "plan"), func(ctx context.Context) { pl, err = p.Plan(ctx, c) })
		out.durations = append(out.durations, time.Since(start))
		if err != nil {
			return out, fmt.Errorf("pass %d: %w", pass+1, err)
		}
		out.timeouts += len(pl.TimedOut)
		cmd := pl.Command
		if *benchVerbose {
			what := "no command"
			if cmd != nil {
				what = fmt.Sprintf("%s %s of %d node(s) -> %d", cmd.Type, cmd.Decision(), len(cmd.Candidates), len(cmd.Replacements))
			}
			fmt.Fprintf(os.Stderr, "pass %d: %d nodes: %s in %s (%v)\n", pass+1, len(c.Nodes), what, out.durations[pass].Round(time.Millisecond), pl.Durations)
		}
		if cmd == nil {
			if waited {
				out.final, out.converged = c, true
				return out, nil
			}
			later := *c
			later.Now = c.Now.Add(p.Options().Cooldown + time.Second)
			c, waited = &later, true
			out.cooldowns++
			continue
		}
		waited = false
		cmd.ID = fmt.Sprintf("pass-%d", pass+1)
		out.commands++
		out.byType[cmd.Type]++
		out.replacements += len(cmd.Replacements)
		for _, cand := range cmd.Candidates {
			out.evicted += len(cand.Reschedulable())
		}
		c = planner.Apply(c, cmd)
	}
}

func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func allPods(c *planner.Cluster) []*corev1.Pod {
	var out []*corev1.Pod
	for _, n := range c.Nodes {
		out = append(out, n.Pods...)
	}
	return out
}

// benchEnv is what every size shares: the NodePool, the catalog's instance types and the
// provisioned clusters, built once per size.
type benchEnv struct {
	nodePool *karpv1.NodePool
	its      []*cloudprovider.InstanceType
	byName   map[string]*cloudprovider.InstanceType
	reqs     requirements.Requirements

	mu          sync.Mutex
	clusters    map[int]*provisioned
	lpTypes     []catalogbench.Column
	lpTypesOnce sync.Once
}

// provisioned is a cluster as the provisioner would have launched it for its pods.
type provisioned struct {
	nodes []*planner.Node
	pods  []*corev1.Pod
}

var (
	benchEnvOnce sync.Once
	benchEnvVal  *benchEnv
	benchEnvErr  error
)

func loadBenchEnv(b testing.TB) *benchEnv {
	b.Helper()
	benchEnvOnce.Do(func() { benchEnvVal, benchEnvErr = newBenchEnv() })
	if benchEnvErr != nil {
		b.Fatal(benchEnvErr)
	}
	return benchEnvVal
}

func newBenchEnv() (*benchEnv, error) {
	np := &karpv1.NodePool{}
	np.Name = benchNodePool
	np.Spec.Template.Spec.NodeClassRef = catalogbench.NodeClassRef()
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
		{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}},
		{Key: "karpenter.k8s.aws/instance-category", Operator: corev1.NodeSelectorOpIn, Values: []string{"c", "m", "r"}},
	}
	np.Spec.Disruption = karpv1.Disruption{
		ConsolidateAfter:    karpv1.NewNillableDuration(0),
		ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
		Budgets:             []karpv1.Budget{{Nodes: "100%"}},
	}
	its, err := catalogbench.InstanceTypes(context.Background(), "us-east-1", np)
	if err != nil {
		return nil, err
	}
	reqs, err := requirements.FromNodeSelectorRequirementsWithMinValues(np.Spec.Template.Spec.Requirements...)
	if err != nil {
		return nil, err
	}
	env := &benchEnv{nodePool: np, its: its, byName: map[string]*cloudprovider.InstanceType{}, reqs: reqs, clusters: map[int]*provisioned{}}
	for _, it := range its {
		env.byName[it.Name] = it
	}
	return env, nil
}

func (env *benchEnv) input() scheduling.Input {
	return scheduling.Input{NodePools: []scheduling.NodePool{{NodePool: env.nodePool, InstanceTypes: env.its}}}
}

// provisioned returns the cluster of at least n nodes the provisioner launches for the benchmark
// pods, building it on first use: it solves a first guess of the pod count, then adds pods in
// proportion to the nodes missing until Solve opens n NodeClaims or more.
func (env *benchEnv) provisioned(b *testing.B, n int) *provisioned {
	env.mu.Lock()
	defer env.mu.Unlock()
	if p := env.clusters[n]; p != nil {
		return p
	}
	start := time.Now()
	gen := newBenchPodGen()
	perNode := 4.0 // a first guess, on the low side; refined from every solve
	var results *scheduling.Results
	for round := 0; ; round++ {
		missing := n
		if results != nil {
			missing = n - len(results.NewNodeClaims)
		}
		if missing <= 0 {
			break
		}
		if round == 20 {
			b.Fatalf("calibration: %d pods still give only %d nodes", len(gen.pods), len(results.NewNodeClaims))
		}
		gen.add(int(math.Ceil(float64(missing)*perNode)) + 1)
		in := env.input()
		in.Pods = gen.pods
		var err error
		results, err = scheduling.Solve(context.Background(), in)
		if err != nil {
			b.Fatal(err)
		}
		if len(results.PodErrors) > 0 {
			b.Fatalf("provisioning: %d pods unschedulable, first: %v", len(results.PodErrors), results.PodErrors[0].Err)
		}
		if len(results.NewNodeClaims) > 0 {
			perNode = float64(len(gen.pods)) / float64(len(results.NewNodeClaims))
		}
		b.Logf("calibration for %d nodes: %d pods -> %d nodes", n, len(gen.pods), len(results.NewNodeClaims))
	}
	p := &provisioned{pods: gen.pods}
	for i, plan := range results.NewNodeClaims {
		p.nodes = append(p.nodes, planner.LaunchNode(plan, fmt.Sprintf("node-%05d", i), benchNow.Add(-time.Hour)))
	}
	b.Logf("provisioned %d nodes for %d pods in %s", len(p.nodes), len(p.pods), time.Since(start).Round(time.Millisecond))
	env.clusters[n] = p
	return p
}

// thin returns the Cluster of the provisioned nodes holding a seeded uniform random keep% of the
// pods.
func (env *benchEnv) thin(p *provisioned, keep int) *planner.Cluster {
	rng := rand.New(rand.NewSource(int64(len(p.nodes))*1000 + int64(keep)))
	kept := map[types.UID]bool{}
	count := int(math.Round(float64(len(p.pods)) * float64(keep) / 100))
	for _, i := range rng.Perm(len(p.pods))[:count] {
		kept[p.pods[i].UID] = true
	}
	c := &planner.Cluster{
		Now:       benchNow,
		Input:     env.input(),
		NodePools: map[string]*karpv1.NodePool{benchNodePool: env.nodePool},
	}
	for _, n := range p.nodes {
		var pods []*corev1.Pod
		for _, pod := range n.Pods {
			if kept[pod.UID] {
				pods = append(pods, pod)
			}
		}
		node := &planner.Node{Node: n.Node, NodeClaim: n.NodeClaim, Pods: pods}
		c.Nodes = append(c.Nodes, node)
		c.Input.ExistingNodes = append(c.Input.ExistingNodes, scheduling.NewExistingNode(node.Node, pods, benchNodePool, true, nil))
	}
	return c
}

// cost is the $/h of every node of c at its offering's price.
func (env *benchEnv) cost(c *planner.Cluster) float64 {
	sum := 0.0
	for _, n := range c.Nodes {
		labels := n.Node.Labels
		it := env.byName[labels[karpv1.LabelInstanceType]]
		price := math.NaN()
		if it != nil {
			for _, o := range it.Offerings {
				if o.Zone() == labels[karpv1.LabelTopologyZone] && o.CapacityType() == labels[karpv1.CapacityTypeLabelKey] {
					price = o.Price
					break
				}
			}
		}
		sum += price
	}
	return sum
}

// benchPodGen draws pods from the scheduling benchmark's generic size mix, in its random order
// (a my-label value, a cpu and a memory index per pod), so that any count is a prefix of a larger
// one.
type benchPodGen struct {
	rng  *rand.Rand
	pods []*corev1.Pod
}

var (
	benchLabelValues = []string{"a", "b", "c", "d", "e", "f", "g"}
	benchCPU         = []int64{100, 250, 500, 1000, 1500}       // millicores
	benchMemory      = []int64{100, 256, 512, 1024, 2048, 4096} // MiB
)

func newBenchPodGen() *benchPodGen { return &benchPodGen{rng: rand.New(rand.NewSource(42))} }

func (g *benchPodGen) add(count int) {
	yes := true
	for range count {
		i := len(g.pods)
		label := benchLabelValues[g.rng.Intn(7)]
		c, m := g.rng.Intn(5), g.rng.Intn(6)
		deploy := fmt.Sprintf("deploy-%02d", i%benchDeployments)
		g.pods = append(g.pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:              fmt.Sprintf("%s-%06d", deploy, i),
				Namespace:         "default",
				UID:               types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i)),
				Labels:            map[string]string{"app": deploy, "my-label": label},
				CreationTimestamp: metav1.NewTime(benchNow.Add(-time.Hour)),
				OwnerReferences: []metav1.OwnerReference{{
					APIVersion: "apps/v1", Kind: "ReplicaSet", Name: deploy + "-rs",
					UID: types.UID("rs-" + deploy), Controller: &yes,
				}},
			},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.invalid/app",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(benchCPU[c], resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(benchMemory[m]<<20, resource.BinarySI),
				}},
			}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning},
		})
	}
}

// lpResources are the resources the LP bound covers.
func lpResources() []corev1.ResourceName {
	return []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods}
}

// lpColumns returns the allowed instance types as LP columns, without those a single other type
// dominates.
func (env *benchEnv) lpColumns() []catalogbench.Column {
	env.lpTypesOnce.Do(func() { env.lpTypes = catalogbench.Columns(env.its, env.reqs, lpResources()) })
	return env.lpTypes
}

// lowerBound is the LP bound of the pods in $/h (see BenchmarkConsolidation).
func (env *benchEnv) lowerBound(pods []*corev1.Pod) float64 {
	return catalogbench.CoveringLP(env.lpColumns(), catalogbench.Demand(pods, lpResources()))
}

// TestBenchLowerBound checks the LP bound of the benchmark pods against bounds that hold for any
// covering: no less than covering each resource alone with its cheapest type per unit, no more
// than the cheapest covering by a single type.
func TestBenchLowerBound(t *testing.T) {
	env := loadBenchEnv(t)
	gen := newBenchPodGen()
	gen.add(1000)
	demand := catalogbench.Demand(gen.pods, lpResources())
	cols := env.lpColumns()
	lower, upper := catalogbench.SimpleBounds(cols, demand)
	lp := env.lowerBound(gen.pods)
	t.Logf("%d LP columns; demand %.1f cores, %.1f GiB, %.0f pods; LP $%.3f/h, within [$%.3f, $%.3f]", len(cols), demand[0]/1000, demand[1]/1000/(1<<30), demand[2]/1000, lp, lower, upper)
	if lp < lower-1e-6 || lp > upper+1e-6 {
		t.Errorf("LP $%.4f/h outside [$%.4f, $%.4f]", lp, lower, upper)
	}
}
