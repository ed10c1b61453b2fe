package planner

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/controllers/state"
	"github.com/joiner-dev/joiner/tenancy"
	"github.com/joiner-dev/joiner/testsupport/fixtures"
)

// The NodePool tenancy property: whatever the cluster, no simulation Joiner runs (the
// provisioner's, and every disruption method's: emptiness, drift and soft-expiry replacement,
// multi- and single-node consolidation delete and replace, the validation before a command runs,
// and passes applied one after the other) plans a NodeClaim that serves a pod of a namespace not
// bound to its NodePool, nor moves such a pod onto an existing node of another tenant's NodePool.
// Clusters are generated from seeded math/rand: NodePools (some tainted), namespaces bound to
// random NodePools (some gone), nodes of random NodePools and sizes (some drifted or expired)
// running pods of any namespace, cross-tenant pods included (they got past a webhook outage), and
// pending pods that select or tolerate random NodePools.

const (
	// tenancyIterations is how many clusters the property is checked on: a fixed number, so that
	// every run checks the same clusters (about 2 s on an idle 2-core machine).
	tenancyIterations = 1000
	tenancySeed       = 20260314
)

// tenancyTypes are the instance types of every generated NodePool, priced a little below linear
// so that both fewer, larger nodes and smaller ones can be cheaper.
func tenancyTypes() []*cloudprovider.InstanceType {
	return []*cloudprovider.InstanceType{
		itype("small", "2", "4Gi", 0.10), itype("medium", "4", "8Gi", 0.19),
		itype("large", "8", "16Gi", 0.37), itype("xlarge", "16", "32Gi", 0.72),
	}
}

// genTenancyCluster generates a cluster snapshot from r.
func genTenancyCluster(r *rand.Rand) *state.ClusterState {
	its := tenancyTypes()
	f := newFixture()
	s := &state.ClusterState{}
	pools := make([]string, 2+r.Intn(3))
	for i := range pools {
		pools[i] = fmt.Sprintf("pool-%d", i)
		np := nodePool(pools[i])
		if r.Intn(10) < 3 {
			np.Spec.Template.Spec.Taints = []karpv1.Taint{{Key: "tenant", Value: pools[i], Effect: corev1.TaintEffectNoSchedule}}
		}
		f.pool(np, its...)
		s.NodePools = append(s.NodePools, *np)
	}
	namespaces := []string{"ns-0", "ns-1", "ns-2", "ns-3"}
	for _, name := range namespaces {
		ns := corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if r.Intn(10) < 7 {
			var bound []string
			for _, pool := range append(slices.Clone(pools), "retired") {
				if r.Intn(3) == 0 {
					bound = append(bound, pool)
				}
			}
			if len(bound) == 0 {
				bound = []string{pools[r.Intn(len(pools))]}
			}
			ns.Annotations = map[string]string{tenancy.NodePoolsAnnotation: strings.Join(bound, ",")}
		}
		s.Namespaces = append(s.Namespaces, ns)
	}
	g := &tenancyGen{r: r, pools: pools, namespaces: namespaces}
	for i, n := 0, 2+r.Intn(6); i < n; i++ {
		it := its[r.Intn(len(its))]
		allocatable := it.Allocatable()
		node := f.odNode(fmt.Sprintf("node-%d", i), pools[r.Intn(len(pools))], it.Name, g.podsFitting(fmt.Sprintf("n%d", i), allocatable.Cpu().MilliValue())...)
		switch r.Intn(8) {
		case 0:
			node.NodeClaim.SetCondition(t0.Add(-30*time.Minute), karpv1.ConditionTypeDrifted, metav1.ConditionTrue, "NodePoolDrifted", "")
		case 1:
			node.NodeClaim.SetCondition(t0.Add(-20*time.Minute), ConditionTypeExpired, metav1.ConditionTrue, "Expired", "")
		}
		s.Nodes = append(s.Nodes, *node.Node)
		s.NodeClaims = append(s.NodeClaims, *node.NodeClaim)
		for _, p := range node.Pods {
			s.Pods = append(s.Pods, *p)
		}
	}
	for i, n := 0, r.Intn(4); i < n; i++ {
		s.Pods = append(s.Pods, fixtures.Pod(fmt.Sprintf("pending-%d", i), g.decorate))
	}
	return s
}

// tenancyGen generates pods of random namespaces that select and tolerate random NodePools.
type tenancyGen struct {
	r          *rand.Rand
	pools      []string
	namespaces []string
}

// pod returns a running pod of a ReplicaSet of its own.
func (g *tenancyGen) pod(name string) *corev1.Pod {
	p := pod(name, "100m", "256Mi")
	g.decorate(p)
	return p
}

// decorate gives p a random namespace, cpu request, node selection and tolerations.
func (g *tenancyGen) decorate(p *corev1.Pod) {
	cpus := []string{"250m", "500m", "1", "1500m", "3"}
	p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpus[g.r.Intn(len(cpus))])
	p.Namespace = g.namespaces[g.r.Intn(len(g.namespaces))]
	switch g.r.Intn(10) {
	case 0, 1:
		withNodeSelector(karpv1.NodePoolLabelKey, g.pools[g.r.Intn(len(g.pools))])(p)
	case 2:
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	if g.r.Intn(3) == 0 {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "tenant", Operator: corev1.TolerationOpEqual,
			Value: g.pools[g.r.Intn(len(g.pools))], Effect: corev1.TaintEffectNoSchedule})
	}
}

// podsFitting returns 0 to 4 pods whose cpu requests fit in milliCPU.
func (g *tenancyGen) podsFitting(prefix string, milliCPU int64) []*corev1.Pod {
	var out []*corev1.Pod
	for i, n := 0, g.r.Intn(5); i < n; i++ {
		p := g.pod(fmt.Sprintf("%s-pod-%d", prefix, i))
		if req := p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(); req <= milliCPU {
			milliCPU -= req
			out = append(out, p)
		}
	}
	return out
}

// tenancyRun is what the simulations of one snapshot planned.
type tenancyRun struct {
	// breaches describe every placement that breaks the binding of a namespace.
	breaches []string
	// commands are the decisions of every method, by "type/decision".
	commands []string
	// boundMoves counts the commands that move a pod of a bound namespace.
	boundMoves int
	// provisioned counts the NodeClaims the provisioner's simulation planned.
	provisioned int
}

// simulateAll runs, on snapshot, the provisioner's simulation and every disruption method, and
// checks what they plan against truth (the bindings as they are).
func simulateAll(t *testing.T, p *Planner, snapshot *state.ClusterState, truth *state.Tenancy) tenancyRun {
	t.Helper()
	ctx := context.Background()
	var run tenancyRun
	in, err := state.BuildInput(ctx, fake.New(tenancyTypes()...), snapshot, nil, scheduling.Options{}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	res, err := scheduling.Solve(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	run.provisioned = len(res.NewNodeClaims)
	run.breaches = placementBreaches("provisioning", truth, res)
	c := NewCluster(t0, snapshot, in, nil)
	ps, err := newPass(c)
	if err != nil {
		t.Fatal(err)
	}
	plan := &Plan{Eligible: map[string]int{}, Durations: map[string]time.Duration{}}
	p.budgets(c, plan)
	nominated, err := ps.nominated(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cands, _ := p.candidates(c, ps.infos, nominated)
	ps.eventual = cands.eventual
	methods := []func(context.Context, *pass, []*Candidate, *Plan, noter) (*Command, error){p.emptiness, p.drift, p.softExpiry, p.multiNode, p.singleNode}
	for _, method := range methods {
		cmd, err := method(ctx, ps, cands.graceful, plan, func(*Candidate, string, string) {})
		if err != nil {
			t.Fatal(err)
		}
		if cmd == nil {
			continue
		}
		run.record(cmd, truth)
		if cmd.Reason == karpv1.DisruptionReasonUnderutilized {
			valid, _, _, err := p.Validate(ctx, c, cmd)
			if err != nil {
				t.Fatal(err)
			}
			if valid != nil {
				run.breaches = append(run.breaches, commandBreaches("validated "+cmd.String(), truth, valid)...)
			}
		}
	}
	plans, err := p.DryRun(ctx, c, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i, pl := range plans {
		if pl.Command != nil {
			run.breaches = append(run.breaches, commandBreaches(fmt.Sprintf("pass %d %s", i+1, pl.Command), truth, pl.Command)...)
		}
	}
	return run
}

// record adds cmd's breaches and kind to the run.
func (run *tenancyRun) record(cmd *Command, truth *state.Tenancy) {
	run.breaches = append(run.breaches, commandBreaches(cmd.String(), truth, cmd)...)
	run.commands = append(run.commands, cmd.Type+"/"+cmd.Decision())
	for _, cand := range cmd.Candidates {
		if slices.ContainsFunc(cand.reschedulable, func(p *corev1.Pod) bool { return len(truth.Bound(p.Namespace)) > 0 }) {
			run.boundMoves++
			return
		}
	}
}

// commandBreaches checks the replacements a command would create and the simulation behind it.
func commandBreaches(where string, truth *state.Tenancy, cmd *Command) []string {
	out := claimBreaches(where+": replacement", truth, cmd.Replacements)
	if cmd.Results != nil {
		out = append(out, placementBreaches(where, truth, cmd.Results)...)
	}
	return out
}

// placementBreaches checks every planned NodeClaim and every pod moved onto an existing node.
func placementBreaches(where string, truth *state.Tenancy, res *scheduling.Results) []string {
	out := claimBreaches(where+": new NodeClaim", truth, res.NewNodeClaims)
	for _, pl := range res.ExistingNodes {
		for _, pod := range pl.Pods {
			if pod.Spec.NodeName != pl.Node.Name && pl.Node.NodePool != "" && !tenancy.Allows(truth.Bound(pod.Namespace), pl.Node.NodePool) {
				out = append(out, fmt.Sprintf("%s: pod %s/%s (namespace bound to %v) moved onto node %s of NodePool %s",
					where, pod.Namespace, pod.Name, truth.Bound(pod.Namespace), pl.Node.Name, pl.Node.NodePool))
			}
		}
	}
	return out
}

func claimBreaches(where string, truth *state.Tenancy, plans []*scheduling.NodeClaimPlan) []string {
	var out []string
	for _, plan := range plans {
		for _, pod := range truth.Refused(plan.NodePool.Name, plan.Pods) {
			out = append(out, fmt.Sprintf("%s of NodePool %s serves pod %s/%s, whose namespace is bound to %v",
				where, plan.NodePool.Name, pod.Namespace, pod.Name, truth.Bound(pod.Namespace)))
		}
	}
	return out
}

// TestTenancyHoldsInEverySimulation checks the property on generated clusters. It also runs every
// cluster with the bindings hidden from the simulation (its Namespaces left out of the snapshot):
// those runs must breach the bindings somewhere, or the generator never made a cluster where the
// tenancy filter matters; and every method must have decided something, or the property was never
// exercised through it.
func TestTenancyHoldsInEverySimulation(t *testing.T) {
	p := newPlanner(Options{Workers: 1})
	seen := map[string]int{}
	boundMoves, provisioned, blindBreaches, iterations := 0, 0, 0, 0
	start := time.Now()
	for ; iterations < tenancyIterations; iterations++ {
		seed := int64(tenancySeed + iterations)
		snapshot := genTenancyCluster(rand.New(rand.NewSource(seed)))
		truth := snapshot.Tenancy()
		run := simulateAll(t, p, snapshot, truth)
		if len(run.breaches) > 0 {
			t.Fatalf("seed %d: %d placement(s) break NodePool tenancy, first: %s", seed, len(run.breaches), run.breaches[0])
		}
		for _, kind := range run.commands {
			seen[kind]++
		}
		boundMoves += run.boundMoves
		provisioned += run.provisioned
		blind := *snapshot
		blind.Namespaces = nil
		blindBreaches += len(simulateAll(t, p, &blind, truth).breaches)
	}
	t.Logf("%d clusters in %s: commands %v, %d moving pods of bound namespaces, %d NodeClaims provisioned; with the bindings hidden, %d breaches",
		iterations, time.Since(start).Round(time.Millisecond), seen, boundMoves, provisioned, blindBreaches)
	for _, kind := range []string{"empty/delete", "drift/replace", "expired/replace", "multi/delete", "multi/replace", "single/delete", "single/replace"} {
		if seen[kind] == 0 {
			t.Errorf("no generated cluster led to a %s command: the property was not checked through it", kind)
		}
	}
	if boundMoves == 0 || provisioned == 0 {
		t.Errorf("no command moved a pod of a bound namespace (%d) or no NodeClaim was provisioned (%d)", boundMoves, provisioned)
	}
	if blindBreaches == 0 {
		t.Error("with the bindings hidden from the simulations nothing broke them: the generated clusters do not exercise the tenancy filter")
	}
}
