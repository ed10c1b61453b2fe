package scale_test

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
)

const (
	pool   = "scale"
	app    = "inflate"
	mib    = 1 << 20
	budget = 10 // percent of a NodePool's nodes that may be disrupted at once (Karpenter's default)
)

// memoryTargets are the RSS issue 25 asks Joiner to stay under, at peak and in steady state, at a
// number of pods; the report says whether each step met it. Steps of other sizes have none.
var memoryTargets = map[int]uint64{1000: 150 * mib, 10000: 256 * mib}

// memoryCeilings are the RSS the test fails above: regression guards with some room over what
// Joiner uses now (156 and 363 MiB at peak; 317 and 2,088 MiB before the cache transforms,
// the listings without copies and GOGC 100).
var memoryCeilings = map[int]uint64{1000: 200 * mib, 10000: 450 * mib}

// row is one line of the report.
type row struct {
	step                      string
	took                      time.Duration
	nodeClaims                int
	rssPeak, rssSteady        uint64
	heapPeak, heapSteady      uint64
	idleCPU                   float64 // fraction of a core
	writes, conflicts         float64
	disruptingMax, allowedMax int
	target                    string // the memory target and whether the step met it
	load                      string
}

// TestScale scales the inflate Deployment through the configured steps and back to 0, and prints
// what Joiner used at each.
func TestScale(t *testing.T) {
	cluster.NodePool(t, pool, []karpv1.NodeSelectorRequirementWithMinValues{
		framework.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
		framework.Req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand),
		framework.Req("karpenter.k8s.aws/instance-category", corev1.NodeSelectorOpIn, "c", "m", "r"),
	}, func(np *karpv1.NodePool) {
		np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5000")}
		np.Spec.Disruption.ConsolidateAfter = karpv1.NewNillableDuration(30 * time.Second)
		np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: fmt.Sprintf("%d%%", budget)}}
	})
	cluster.Deployment(t, app, pool, 0, "250m", func(spec *corev1.PodSpec) {
		spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse("256Mi")
	})
	mon := startMonitor(joiner.pid(), joiner.metricsURL)
	defer mon.stop()
	var rows []row
	from := 0
	for _, n := range cfg.steps {
		rows = append(rows, scaleUp(t, mon, from, n))
		from = n
	}
	rows = append(rows, scaleDown(t, mon, from))
	report(t, rows)
	if !slices.Contains(cfg.steps, 10000) {
		t.Run("10000 pods", func(t *testing.T) {
			t.Skip("the 10,000-pod steps take about 30 minutes and run with `make scale-test` (JOINER_SCALE_STEPS=1000,10000)")
		})
	}
}

// scaleUp scales from → n, waits until every pod is Ready, holds for the idle window and measures.
func scaleUp(t *testing.T, mon *monitor, from, n int) row {
	t.Helper()
	r := row{step: fmt.Sprintf("%d → %d", from, n)}
	before := apiCountsNow(t)
	mon.takePeaks()
	start := time.Now()
	cluster.Scale(t, app, int32(n))
	framework.Eventually(t, 5*time.Minute+time.Duration(n)*100*time.Millisecond, fmt.Sprintf("%d pods Running", n), func(ctx context.Context) (bool, error) {
		return readyReplicas(ctx) == n, nil
	})
	r.took = time.Since(start)
	t.Logf("%s: every pod Running after %s", r.step, r.took.Round(time.Second))
	// The steady state: the first half of the idle window lets the last launches and
	// consolidation settle, the second half is where the CPU is measured. Consolidation may move
	// pods meanwhile, so fewer may be Ready for a moment; the window logs the fewest.
	idleWindow(t, cfg.idle/2, n)
	cpu0 := cpuTimeNow(t)
	idleStart := time.Now()
	idleWindow(t, cfg.idle/2, n)
	r.idleCPU = float64(cpuTimeNow(t)-cpu0) / float64(time.Since(idleStart))
	r.nodeClaims = len(framework.Live(cluster.NodeClaims(t, pool)))
	r.rssPeak, r.heapPeak = mon.takePeaks()
	var err error
	if r.rssSteady, r.heapSteady, err = mon.current(); err != nil {
		t.Errorf("sample Joiner's memory: %v", err)
	}
	after := apiCountsNow(t)
	r.writes, r.conflicts = after.writes-before.writes, after.conflicts-before.conflicts
	r.load = loadAverage()
	if target, ok := memoryTargets[n]; ok {
		r.target = fmt.Sprintf("< %d MiB: met", target/mib)
		if max(r.rssPeak, r.rssSteady) >= target {
			r.target = fmt.Sprintf("< %d MiB: missed", target/mib)
		}
	}
	if ceiling, ok := memoryCeilings[n]; ok && max(r.rssPeak, r.rssSteady) >= ceiling {
		t.Errorf("%s: Joiner's RSS peaked at %d MiB (steady %d MiB), over the test's ceiling of %d MiB", r.step, r.rssPeak/mib, r.rssSteady/mib, ceiling/mib)
	}
	return r
}

// idleWindow is a measurement window of length d with nothing scaling: it samples the Ready pods
// every second and logs the fewest seen (consolidation moving pods), the Deployment's n unchanged.
func idleWindow(t *testing.T, d time.Duration, n int) {
	t.Helper()
	fewest := n
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for end := time.Now().Add(d); time.Now().Before(end); <-tick.C {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if got := readyReplicas(ctx); got >= 0 {
			fewest = min(fewest, got)
		}
		cancel()
	}
	t.Logf("idle for %s: at least %d of %d pods Ready throughout", d, fewest, n)
}

// scaleDown scales to 0 and waits until every NodeClaim is gone, sampling meanwhile that no more
// nodes are disrupted at once than the budget allows.
func scaleDown(t *testing.T, mon *monitor, from int) row {
	t.Helper()
	r := row{step: fmt.Sprintf("%d → 0", from)}
	before := apiCountsNow(t)
	mon.takePeaks()
	start := time.Now()
	cluster.Scale(t, app, 0)
	sampler := framework.Sample(func(ctx context.Context) string {
		disrupting, allowed, err := budgetNow(ctx)
		if err != nil {
			return ""
		}
		if disrupting > r.disruptingMax {
			r.disruptingMax, r.allowedMax = disrupting, allowed
		}
		if disrupting > allowed {
			return fmt.Sprintf("%d NodeClaims disrupted at once, the budget (%d%%) allows %d", disrupting, budget, allowed)
		}
		return ""
	})
	framework.Eventually(t, 20*time.Minute, "every NodeClaim of "+pool+" gone", func(ctx context.Context) (bool, error) {
		list := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
			return false, nil
		}
		return len(list.Items) == 0, nil
	})
	r.took = time.Since(start)
	sampler.Finish(t, "disruption budget on the way down")
	r.rssPeak, r.heapPeak = mon.takePeaks()
	r.rssSteady, r.heapSteady, _ = mon.current()
	after := apiCountsNow(t)
	r.writes, r.conflicts = after.writes-before.writes, after.conflicts-before.conflicts
	r.idleCPU = math.NaN()
	r.load = loadAverage()
	return r
}

// budgetNow counts the pool's NodeClaims as Karpenter's budgets do (those whose instance is
// terminating no longer count), the ones disrupted (being deleted or held by a disruption command),
// and what the budget allows of them.
func budgetNow(ctx context.Context) (disrupting, allowed int, err error) {
	list := &karpv1.NodeClaimList{}
	if err := cluster.Client.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: pool}); err != nil {
		return 0, 0, err
	}
	var counted []karpv1.NodeClaim
	for _, nc := range list.Items {
		if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInstanceTerminating) {
			counted = append(counted, nc)
		}
	}
	pct := intstr.FromString(fmt.Sprintf("%d%%", budget))
	allowed, err = intstr.GetScaledValueFromIntOrPercent(&pct, len(counted), true)
	return framework.Disrupting(counted), allowed, err
}

func readyReplicas(ctx context.Context) int {
	d := &appsv1.Deployment{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: app}, d); err != nil {
		return -1
	}
	return int(d.Status.ReadyReplicas)
}

func apiCountsNow(t *testing.T) apiCounts {
	t.Helper()
	c, err := readAPICounts(joiner.metricsURL)
	if err != nil {
		t.Fatalf("read Joiner's API requests: %v", err)
	}
	return c
}

func cpuTimeNow(t *testing.T) time.Duration {
	t.Helper()
	d, err := cpuTime(joiner.pid())
	if err != nil {
		t.Fatalf("read Joiner's CPU time: %v", err)
	}
	return d
}

// report prints the table to the test log and to standard output.
func report(t *testing.T, rows []row) {
	var b strings.Builder
	fmt.Fprintf(&b, "client rate: %s; disruption: %s; idle window: %s; joiner: %s\n", cfg.clientRate, cfg.disruption, cfg.idle, cfg.binary)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "step\ttime\tNodeClaims\tRSS peak MiB\tRSS steady MiB\theap peak MiB\theap steady MiB\tidle CPU %\tAPI writes\tconflicts\tmax disrupting/allowed\tRSS target\tload\t")
	for _, r := range rows {
		cpu, budget, target := "-", "-", r.target
		if target == "" {
			target = "-"
		}
		if !math.IsNaN(r.idleCPU) {
			cpu = fmt.Sprintf("%.2f", 100*r.idleCPU)
		} else {
			budget = fmt.Sprintf("%d/%d", r.disruptingMax, r.allowedMax)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\t%.0f\t%.0f\t%s\t%s\t%s\t\n", r.step, r.took.Round(time.Second), r.nodeClaims,
			r.rssPeak/mib, r.rssSteady/mib, r.heapPeak/mib, r.heapSteady/mib, cpu, r.writes, r.conflicts, budget, target, r.load)
	}
	_ = w.Flush()
	t.Log("\n" + b.String())
	fmt.Fprint(os.Stdout, b.String())
}
