package planner

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/nodepredicates"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

// Builders for the planner's unit tests: instance types with chosen prices, NodePools, nodes of
// an instance type in a zone holding pods, and the Cluster of a pass built from them.

// t0 is the time of every pass unless a test moves it.
var t0 = time.Date(2026, 3, 4, 12, 0, 0, 0, time.UTC)

// fixedClock is the clock the planner reads for its timeouts: it never moves, so no method times
// out and no test sleeps.
func fixedClock() time.Time { return t0 }

func newPlanner(opts Options) *Planner { return New(opts, fixedClock) }

// plan runs one pass and fails the test on error.
func plan(t *testing.T, p *Planner, c *Cluster) *Plan {
	t.Helper()
	pl, err := p.Plan(context.Background(), c)
	if err != nil {
		t.Fatalf("Plan: %v", err)
	}
	return pl
}

// itype is an instance type of cpu and memory (and 110 pods) whose offerings, one per zone in
// test-zone-1 and -2 and per capacity type (on-demand when none is given), all cost price.
func itype(name, cpu, memory string, price float64, capacityTypes ...string) *cloudprovider.InstanceType {
	if len(capacityTypes) == 0 {
		capacityTypes = []string{karpv1.CapacityTypeOnDemand}
	}
	var offerings cloudprovider.Offerings
	for _, ct := range capacityTypes {
		for _, zone := range []string{fake.Zone1, fake.Zone2} {
			offerings = append(offerings, cloudprovider.NewOffering(zone, ct, price, true))
		}
	}
	return fake.NewInstanceType(fake.InstanceTypeOptions{
		Name: name,
		Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    resource.MustParse(cpu),
			corev1.ResourceMemory: resource.MustParse(memory),
			corev1.ResourcePods:   resource.MustParse("110"),
		},
		Offerings: offerings,
	})
}

type poolOption func(*karpv1.NodePool)

// nodePool is a dynamic NodePool that consolidates WhenEmptyOrUnderutilized after 0s, with a
// budget of 100% so that budgets only matter in the tests that set them.
func nodePool(name string, opts ...poolOption) *karpv1.NodePool {
	np := &karpv1.NodePool{}
	np.Name = name
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "test.joiner.dev", Kind: "TestNodeClass", Name: "default"}
	np.Spec.Disruption = karpv1.Disruption{
		ConsolidateAfter:    karpv1.NewNillableDuration(0),
		ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
		Budgets:             []karpv1.Budget{{Nodes: "100%"}},
	}
	for _, o := range opts {
		o(np)
	}
	return np
}

func withPolicy(p karpv1.ConsolidationPolicy) poolOption {
	return func(np *karpv1.NodePool) { np.Spec.Disruption.ConsolidationPolicy = p }
}

func withConsolidateAfter(d karpv1.NillableDuration) poolOption {
	return func(np *karpv1.NodePool) { np.Spec.Disruption.ConsolidateAfter = d }
}

func withBudgets(b ...karpv1.Budget) poolOption {
	return func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = b }
}

type podOption func(*corev1.Pod)

// pod is a running pod of a ReplicaSet of its own (controller UID "rs-<name>"), labelled
// app=<name>, requesting cpu and memory.
func pod(name, cpu, memory string, opts ...podOption) *corev1.Pod {
	yes := true
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID("pod-" + name),
			Labels:            map[string]string{"app": name},
			CreationTimestamp: metav1.NewTime(t0.Add(-time.Hour)),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs-" + name, UID: types.UID("rs-" + name), Controller: &yes,
			}},
		},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(memory),
			}},
		}}},
		Status: corev1.PodStatus{
			Phase:      corev1.PodRunning,
			StartTime:  &metav1.Time{Time: t0.Add(-time.Hour)},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withAnnotation(k, v string) podOption {
	return func(p *corev1.Pod) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[k] = v
	}
}

func withPriority(prio int32) podOption {
	return func(p *corev1.Pod) { p.Spec.Priority = &prio }
}

// ownedBy makes kind/name the pod's controller.
func ownedBy(kind, name string) podOption {
	return func(p *corev1.Pod) {
		p.OwnerReferences[0].Kind = kind
		p.OwnerReferences[0].Name = name
		p.OwnerReferences[0].UID = types.UID(kind + "-" + name)
	}
}

func withNodeSelector(k, v string) podOption {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		p.Spec.NodeSelector[k] = v
	}
}

// fixture collects NodePools, nodes, pending pods and PDBs, and builds the Cluster of a pass.
type fixture struct {
	now     time.Time
	pools   []scheduling.NodePool
	nodes   []*Node
	pending []*corev1.Pod
	pdbs    []policyv1.PodDisruptionBudget
	inQueue map[string]bool
}

func newFixture() *fixture { return &fixture{now: t0} }

// pool adds a NodePool with its instance types.
func (f *fixture) pool(np *karpv1.NodePool, its ...*cloudprovider.InstanceType) *karpv1.NodePool {
	f.pools = append(f.pools, scheduling.NodePool{NodePool: np, InstanceTypes: its})
	return np
}

// instanceType finds the named instance type among the NodePools' types.
func (f *fixture) instanceType(name string) *cloudprovider.InstanceType {
	for _, p := range f.pools {
		for _, it := range p.InstanceTypes {
			if it.Name == name {
				return it
			}
		}
	}
	return nil
}

// node adds a Ready node of the NodePool, of instance type itName in zone with capacity type ct,
// holding pods, and its initialized, consolidatable NodeClaim (created an hour ago). The pods are
// bound to it. The returned Node may be changed until cluster() is called.
func (f *fixture) node(name, pool, itName, zone, ct string, pods ...*corev1.Pod) *Node {
	labels := map[string]string{
		karpv1.NodePoolLabelKey:     pool,
		karpv1.LabelInstanceType:    itName,
		karpv1.LabelTopologyZone:    zone,
		karpv1.CapacityTypeLabelKey: ct,
		karpv1.LabelHostname:        name,
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110"),
	}
	allocatable := capacity
	if it := f.instanceType(itName); it != nil {
		capacity, allocatable = it.Capacity, it.Allocatable()
	}
	created := metav1.NewTime(f.now.Add(-time.Hour))
	providerID := "fake:///" + name
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: created},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: allocatable,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc-" + name, Labels: labels, CreationTimestamp: created}}
	nc.Status.ProviderID = providerID
	nc.Status.NodeName = name
	nc.Status.Capacity, nc.Status.Allocatable = capacity, allocatable
	for _, c := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeConsolidatable} {
		nc.SetCondition(created.Time, c, metav1.ConditionTrue, c, "")
	}
	for _, p := range pods {
		p.Spec.NodeName = name
	}
	n := &Node{Node: node, NodeClaim: nc, Pods: pods}
	f.nodes = append(f.nodes, n)
	return n
}

// odNode is a node in test-zone-1 on on-demand capacity.
func (f *fixture) odNode(name, pool, itName string, pods ...*corev1.Pod) *Node {
	return f.node(name, pool, itName, fake.Zone1, karpv1.CapacityTypeOnDemand, pods...)
}

// pdb adds a PodDisruptionBudget selecting app=<app> with disruptionsAllowed allowed.
func (f *fixture) pdb(name, app string, allowed int32) {
	minAvailable := intstr.FromInt32(1)
	f.pdbs = append(f.pdbs, policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
		Status: policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	})
}

// cluster builds the Cluster of a pass at f.now: the scheduling input's existing nodes are the
// fixture's nodes with their pods.
func (f *fixture) cluster() *Cluster {
	c := &Cluster{
		Now:       f.now,
		Input:     scheduling.Input{NodePools: f.pools, Pods: f.pending},
		Nodes:     f.nodes,
		NodePools: map[string]*karpv1.NodePool{},
		PDBs:      f.pdbs,
		InQueue:   f.inQueue,
	}
	for _, p := range f.pools {
		c.NodePools[p.NodePool.Name] = p.NodePool
	}
	for _, n := range f.nodes {
		// As state.BuildInput: a managed node is initialized when its NodeClaim is, an
		// unmanaged one when it is Ready.
		initialized := n.Initialized()
		if n.NodeClaim == nil {
			initialized = nodepredicates.NodeReady(n.Node)
		}
		c.Input.ExistingNodes = append(c.Input.ExistingNodes, scheduling.NewExistingNode(n.Node, n.Pods, n.NodePoolName(), initialized, nil))
	}
	return c
}

// candidateNames are the names of the command's candidates, sorted.
func candidateNames(cmd *Command) []string {
	var out []string
	for _, c := range cmd.Candidates {
		out = append(out, c.Name())
	}
	slices.Sort(out)
	return out
}

// verdictOf returns the message of the node's verdict and its reason, failing when there is none.
func verdictOf(t *testing.T, pl *Plan, node string) Verdict {
	t.Helper()
	v, ok := pl.Verdict(node)
	if !ok {
		t.Fatalf("no verdict for %s; verdicts: %+v", node, pl.Verdicts)
	}
	return v
}

// replacementTypes are the instance-type names of each replacement.
func replacementTypes(cmd *Command) [][]string {
	var out [][]string
	for _, r := range cmd.Replacements {
		out = append(out, r.InstanceTypeOptions.Names())
	}
	return out
}

// maxCompatiblePrice is the most any available offering of any option of the replacement,
// compatible with its requirements, costs: an upper bound on what its launch can cost.
func maxCompatiblePrice(r *scheduling.NodeClaimPlan) float64 {
	worst := 0.0
	for _, it := range r.InstanceTypeOptions {
		for _, o := range it.Offerings.Available().Compatible(r.Requirements) {
			worst = max(worst, o.Price)
		}
	}
	return worst
}
