package scheduling

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// Sizing: how big a planned NodeClaim is made, and when a pod opens a new one rather than grow
// one.
//
// A NodeClaim costs what its cheapest option fitting its pods costs, and real price lists are not
// linear in size: a larger type often costs less per cpu (spot prices vary from type to type, and
// the kubelet keeps a smaller share of a larger node). Sizing NodeClaims one pod at a time, by the
// price each pod adds, never reaches those types: from a node holding one pod, the next size up
// costs more than a second small node, and so on. So a NodeClaim is sized for the pods still to
// come:
//
//   - When a pod opens a NodeClaim, the NodeClaim commits to a target, the option of least unit
//     price: its price over its coverage, the share of the pending demand (the pods of this pass
//     not placed yet, this one included) that its room can hold, at most 1. Room is counted per
//     resource in whole copies of the pod's request, so that a type with room for 1.9 pods does
//     not look 95% as useful as one with room for 2. The target's price becomes the NodeClaim's
//     budget.
//   - A placement that keeps a NodeClaim's cheapest fitting option within its budget is free; one
//     that takes it over its budget costs the excess over the coverage of the room the grown
//     NodeClaim has (its unit price), and an opening costs its target's unit price. Placements are
//     compared by unit price first, then by the price they add to the NodeClaims' cheapest
//     options (plan.better).
//   - The budget only guides packing: the price and options of a NodeClaim are still those of
//     its cheapest fitting option (finalize.go), and the improvement pass compares those prices.
//
// With prices linear in size, as in the synthetic benchmark, every size costs about the same per
// unit, so targets are large while much is pending, budgets are seldom reached, and placements are
// decided by the prices they add: the packing sizes NodeClaims one pod at a time where that costs
// nothing.

// coverage returns the share of the pending demand that the room of a node with allocatable
// alloc (extended resources in ext) has once used is taken: for each resource the pending demand
// has, the room (in whole copies of q's request, when q requests it) over that demand, at most 1,
// and the least of those. Extended resources count only when q requests them, so that a pod
// without a GPU is not sized for the GPU pods to come. It is 0 when a demanded resource has no
// room.
func (s *solver) coverage(q *podInfo, alloc *[resources.NumCore]int64, ext map[corev1.ResourceName]int64, used *resources.Vec) float64 {
	c := 1.0
	for r := range resources.NumCore {
		d := s.pending.Core[r]
		if d <= 0 {
			continue
		}
		room := alloc[r] - used.Core[r]
		if need := q.requests.Core[r]; need > 0 && room > 0 {
			room -= room % need
		}
		if room <= 0 {
			return 0
		}
		c = min(c, float64(room)/float64(d))
	}
	for name, need := range q.requests.Extended {
		d := s.pending.Extended[name]
		if need <= 0 || d <= 0 {
			continue
		}
		room := ext[name] - used.Extended[name]
		if room > 0 {
			room -= room % need
		}
		if room <= 0 {
			return 0
		}
		c = min(c, float64(room)/float64(d))
	}
	return c
}

// unitPrice is what adding price buys when the room it gives covers cov of the pending demand.
func unitPrice(price, cov float64) float64 {
	if cov <= 0 {
		return math.Inf(1)
	}
	return price / cov
}

// openingTarget returns the option a NodeClaim opened for q on the template t commits to: of the
// options of opts from `from` on that fit used plus q, the one of least unit price (the cheaper of
// equal ones), and that unit price. from is the cheapest fitting option, so the scan stops at the
// first option whose price alone is no better than the best unit price found.
func (s *solver) openingTarget(q *podInfo, t *template, opts *optionSet, from int, used *resources.Vec) (int, float64) {
	best, bestUnit := from, math.Inf(1)
	extended := used.Extended != nil || q.requests.Extended != nil
	for i := from; i < len(opts.typeIndices) && opts.price[i] < bestUnit-priceEpsilon; i++ {
		if !resources.FitsCore(used, &q.requests, &opts.alloc[i]) {
			continue
		}
		info := &t.instanceTypes[opts.typeIndices[i]]
		if extended && !resources.FitsSum(used, &q.requests, &info.alloc) {
			continue
		}
		if u := unitPrice(opts.price[i], s.coverage(q, &opts.alloc[i], info.alloc.Extended, used)); u < bestUnit-priceEpsilon {
			best, bestUnit = i, u
		}
	}
	return best, bestUnit
}

// sizeOpening completes the plan of q opening a NodeClaim: its target, budget and unit price.
// fit leaves an opening's unit price at its cheapest option's price, a lower bound, so that a
// caller can skip this when even that cannot win.
func (s *solver) sizeOpening(q *podInfo, p *plan) {
	target, unit := s.openingTarget(q, p.target.tmpl, p.opts, p.optionIndex, &p.target.used)
	p.budget, p.unit = p.opts.price[target], unit
}

// growthUnit returns the unit price of placing q on the planned NodeClaim b when its cheapest
// option fitting both is option idx of opts: 0 within b's budget, else the excess over the
// coverage of the room that option leaves.
func (s *solver) growthUnit(q *podInfo, b *bin, opts *optionSet, idx int) float64 {
	over := opts.price[idx] - b.budget
	if over <= priceEpsilon {
		return 0
	}
	info := &b.tmpl.instanceTypes[opts.typeIndices[idx]]
	return unitPrice(over, s.coverage(q, &opts.alloc[idx], info.alloc.Extended, &b.used))
}

// startPending sets the pending demand to the requests of pods.
func (s *solver) startPending(pods []*podInfo) {
	s.pending = resources.Vec{}
	for _, p := range pods {
		s.pending.Add(&p.requests)
	}
}
