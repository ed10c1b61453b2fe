package planner

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/requirements"
)

// MinInstanceTypesForSpotToSpot is how many cheaper instance types a single spot node's
// replacement must be able to choose from (Karpenter v1.14), so that spot-to-spot consolidation
// cannot race to the bottom of the spot market.
const MinInstanceTypesForSpotToSpot = 15

// pass is the part of a disruption pass shared by its simulations: the scheduler prepared once
// from the NodePools, their instance types and the DaemonSets.
type pass struct {
	cluster   *Cluster
	scheduler *scheduling.Scheduler
	// nodes are the cluster's existing nodes prepared once for every simulation of the pass.
	nodes *scheduling.NodeSet
	infos map[string]*nodeInfo
	// held marks (by position in nodes) the nodes a command already holds: no simulation places
	// pods on them, and their reschedulable pods are placed again with every simulation's pods
	// (heldPods).
	held     []bool
	heldPods []*corev1.Pod
	// eventual are the candidates of drift and soft expiry (see candidateSet).
	eventual []*Candidate
	// buffered and bufferUnplaced are where the CapacityBuffers' units and the expected pods are
	// (buffers.go), set by nominated; expectedRoom marks the buffered nodes that hold expected pods
	// only, and expectedUnplaced counts the expected pods placed nowhere.
	buffered         map[string]bool
	bufferUnplaced   int
	expectedRoom     map[string]bool
	expectedUnplaced int
}

// newPass prepares a pass over c: the scheduler, every managed node's price and cost, and the
// nodes commands hold.
func newPass(c *Cluster) (*pass, error) {
	sched, err := scheduling.Prepare(c.Input.NodePools, c.Input.DaemonSetPods, c.Input.Options)
	if err != nil {
		return nil, fmt.Errorf("prepare the scheduling simulation: %w", err)
	}
	ps := &pass{cluster: c, scheduler: sched.WithVolumes(c.Input.Volumes), infos: map[string]*nodeInfo{}}
	// The nodes are prepared while the candidates are described: both read every pod.
	prepared := make(chan *scheduling.NodeSet)
	go func() { prepared <- scheduling.NewNodeSet(c.Input.ExistingNodes) }()
	var held []string
	for _, n := range c.Nodes {
		if n.NodeClaim == nil {
			continue
		}
		info := c.describe(n)
		ps.infos[n.Name()] = info
		if n.InCommand(c.InQueue) {
			ps.heldPods = append(ps.heldPods, info.reschedulable...)
			held = append(held, n.Name())
		}
	}
	ps.nodes = <-prepared
	for name, info := range ps.infos {
		if i, ok := ps.nodes.Index(name); ok {
			info.idle = info.price * (1 - ps.nodes.RequestedShare(i))
		}
	}
	ps.held = make([]bool, ps.nodes.Len())
	for _, name := range held {
		if i, ok := ps.nodes.Index(name); ok {
			ps.held[i] = true
		}
	}
	return ps, nil
}

// simulation is the outcome of removing a set of candidates.
type simulation struct {
	results *scheduling.Results
	// failure explains why the set's pods cannot all be rescheduled, "" when they can.
	failure string
}

// simulate reschedules the candidates' pods, with the pending pods, onto the remaining nodes and
// new NodeClaims, exactly as the provisioner would place them.
func (ps *pass) simulate(ctx context.Context, set []*Candidate) (*simulation, error) {
	leave := slices.Clone(ps.held)
	var pods []*corev1.Pod
	moving := map[types.UID]bool{}
	for _, c := range set {
		if i, ok := ps.nodes.Index(c.Name()); ok {
			leave[i] = true
		}
		for _, pod := range c.reschedulable {
			pods = append(pods, pod)
			moving[pod.UID] = true
		}
	}
	pods = append(pods, ps.cluster.Input.Pods...)
	pods = append(pods, ps.heldPods...)
	results, err := ps.scheduler.SolveOn(ctx, pods, ps.nodes, leave, ps.remaining(set))
	if err != nil {
		return nil, fmt.Errorf("simulate removing %d node(s): %w", len(set), err)
	}
	sim := &simulation{results: results}
	var failed []string
	for _, pe := range results.PodErrors {
		if moving[pe.Pod.UID] {
			failed = append(failed, fmt.Sprintf("%s/%s => %v", pe.Pod.Namespace, pe.Pod.Name, pe.Err))
		}
	}
	for _, placement := range results.ExistingNodes {
		if placement.Node.Initialized {
			continue
		}
		for _, pod := range placement.Pods {
			if moving[pod.UID] {
				failed = append(failed, fmt.Sprintf("%s/%s => would schedule against uninitialized node %s", pod.Namespace, pod.Name, placement.Node.Name))
			}
		}
	}
	if msg := ps.bufferLoss(results); msg != "" {
		failed = append(failed, msg)
	}
	if len(failed) > 0 {
		if len(failed) > 5 {
			failed = append(failed[:5], fmt.Sprintf("and %d more", len(failed)-5))
		}
		sim.failure = "Not all pods would schedule, " + strings.Join(failed, "; ")
	}
	return sim, nil
}

// nominated returns the nodes the provisioner would place the pending pods on: removing one of
// them would only make the pods wait for another launch (Karpenter blocks them while nominated).
func (ps *pass) nominated(ctx context.Context) (map[string]bool, error) {
	out := map[string]bool{}
	if len(ps.cluster.Input.Pods) == 0 {
		return out, nil
	}
	results, err := ps.scheduler.SolveOn(ctx, ps.cluster.Input.Pods, ps.nodes, ps.held, ps.remaining(nil))
	if err != nil {
		return nil, fmt.Errorf("simulate the pending pods: %w", err)
	}
	ps.noteBuffers(results)
	for _, pl := range results.ExistingNodes {
		if hasRealPod(pl.Pods) {
			out[pl.Node.Name] = true
		}
	}
	return out, nil
}

// remaining is what is left of each NodePool's limits once the set's nodes are gone.
func (ps *pass) remaining(set []*Candidate) map[string]corev1.ResourceList {
	out := map[string]corev1.ResourceList{}
	for _, np := range ps.cluster.Input.NodePools {
		if np.Remaining != nil {
			out[np.NodePool.Name] = np.Remaining.DeepCopy()
		}
	}
	for _, c := range set {
		rl, ok := out[c.node.NodePoolName()]
		if !ok {
			continue
		}
		for name, q := range c.node.NodeClaim.Status.Capacity {
			if cur, ok := rl[name]; ok {
				cur.Add(q)
				rl[name] = cur
			}
		}
		if cur, ok := rl["nodes"]; ok {
			cur.Add(resource.MustParse("1"))
			rl["nodes"] = cur
		}
	}
	return out
}

// priceReplacements narrows each replacement's instance-type options so that whatever the launch
// picks, the replacements together cost less than the candidates by the churn guard's margin, and
// pins spot where the candidates allow it (Karpenter v1.14's rules, generalised to n
// replacements). It returns the narrowed plans and the estimated saving, or why there is none.
func (p *Planner) priceReplacements(set []*Candidate, plans []*scheduling.NodeClaimPlan, multi bool) ([]*scheduling.NodeClaimPlan, float64, string) {
	candidatePrice := 0.0
	allSpot := true
	for _, c := range set {
		candidatePrice += c.price
		if c.CapacityType() != karpv1.CapacityTypeSpot {
			allSpot = false
		}
	}
	threshold := candidatePrice*(1-p.opts.MinSavingsFraction) - p.opts.MinSavings
	out := make([]*scheduling.NodeClaimPlan, len(plans))
	spotToSpot := allSpot
	for i, plan := range plans {
		cp := *plan
		if !allowsCapacityType(cp.Requirements, karpv1.CapacityTypeSpot) {
			spotToSpot = false
		}
		out[i] = &cp
	}
	if spotToSpot {
		if !p.opts.SpotToSpot {
			return nil, 0, "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"
		}
		for _, plan := range out {
			pin(plan, karpv1.CapacityTypeSpot)
		}
	}
	// Each replacement's cheapest worst launch price; together they must stay under the threshold,
	// and the slack between is shared evenly so any launch choice keeps the sum under it.
	floors := make([]float64, len(out))
	sum := 0.0
	for i, plan := range out {
		floors[i] = math.Inf(1)
		for _, it := range plan.InstanceTypeOptions {
			if w, ok := worstLaunchPrice(it, plan.Requirements); ok && w < floors[i] {
				floors[i] = w
			}
		}
		sum += floors[i]
	}
	if !(sum < threshold) {
		return nil, 0, "Can't replace with a cheaper node"
	}
	slack := (threshold - sum) / float64(len(out))
	savings := candidatePrice
	for i, plan := range out {
		limit := floors[i] + slack
		if multi && len(out) == 1 {
			// A single replacement of a type some candidate already has must be cheaper than that
			// candidate, or the "replacement" only deletes the others (Karpenter's
			// filterOutSameInstanceType).
			for _, c := range set {
				if c.instanceType != nil && slices.ContainsFunc(plan.InstanceTypeOptions, func(it *cloudprovider.InstanceType) bool { return it.Name == c.instanceType.Name }) {
					limit = math.Min(limit, c.price)
				}
			}
		}
		var kept cloudprovider.InstanceTypes
		for _, it := range plan.InstanceTypeOptions {
			if w, ok := worstLaunchPrice(it, plan.Requirements); ok && w < limit {
				kept = append(kept, it)
			}
		}
		if len(kept) == 0 {
			return nil, 0, "Can't replace with a cheaper node"
		}
		if spotToSpot && len(set) == 1 {
			if len(kept) < MinInstanceTypesForSpotToSpot {
				return nil, 0, fmt.Sprintf("SpotToSpotConsolidation requires %d cheaper instance type options than the current candidate to consolidate, got %d", MinInstanceTypesForSpotToSpot, len(kept))
			}
			kept = kept[:MinInstanceTypesForSpotToSpot]
		}
		plan.InstanceTypeOptions = kept
		plan.Requirements = withInstanceTypes(plan.Requirements, kept)
		// Pin spot only when an option offers spot: otherwise the price check used on-demand and
		// the pin would leave nothing to launch (and an infinite price).
		if !spotToSpot && allowsCapacityType(plan.Requirements, karpv1.CapacityTypeSpot) && allowsCapacityType(plan.Requirements, karpv1.CapacityTypeOnDemand) &&
			offersCapacityType(kept, plan.Requirements, karpv1.CapacityTypeSpot) {
			pin(plan, karpv1.CapacityTypeSpot)
		}
		plan.Price = cheapestPrice(kept, plan.Requirements)
		savings -= plan.Price
	}
	return out, savings, ""
}

// worstLaunchPrice is the most a launch of it under reqs could cost: among its available offerings
// compatible with reqs, the first capacity type present in the order reserved, spot, on-demand,
// and the most expensive offering of that type.
func worstLaunchPrice(it *cloudprovider.InstanceType, reqs requirements.Requirements) (float64, bool) {
	offerings := it.Offerings.Available().Compatible(reqs)
	for _, ct := range []string{karpv1.CapacityTypeReserved, karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
		worst, found := 0.0, false
		for _, o := range offerings {
			if o.CapacityType() == ct && (!found || o.Price > worst) {
				worst, found = o.Price, true
			}
		}
		if found {
			return worst, true
		}
	}
	return 0, false
}

// cheapestPrice is the price of the cheapest available offering compatible with reqs among its.
func cheapestPrice(its cloudprovider.InstanceTypes, reqs requirements.Requirements) float64 {
	best := math.Inf(1)
	for _, it := range its {
		if o, ok := it.Offerings.Available().CheapestCompatible(reqs); ok && o.Price < best {
			best = o.Price
		}
	}
	return best
}

// offersCapacityType reports whether one of its has an available offering of capacity type ct
// compatible with reqs.
func offersCapacityType(its cloudprovider.InstanceTypes, reqs requirements.Requirements, ct string) bool {
	reqs = reqs.Intersect(requirements.New(requirements.In(karpv1.CapacityTypeLabelKey, ct)))
	for _, it := range its {
		if len(it.Offerings.Available().Compatible(reqs)) > 0 {
			return true
		}
	}
	return false
}

func allowsCapacityType(reqs requirements.Requirements, ct string) bool {
	return reqs.Intersects(requirements.New(requirements.In(karpv1.CapacityTypeLabelKey, ct))) == nil
}

// pin narrows the plan's capacity type to ct.
func pin(plan *scheduling.NodeClaimPlan, ct string) {
	reqs := plan.Requirements.Intersect(requirements.New(requirements.In(karpv1.CapacityTypeLabelKey, ct)))
	plan.Requirements = reqs
}

// withInstanceTypes narrows reqs to the instance types its.
func withInstanceTypes(reqs requirements.Requirements, its cloudprovider.InstanceTypes) requirements.Requirements {
	return reqs.Intersect(requirements.New(requirements.In(karpv1.LabelInstanceType, its.Names()...)))
}
