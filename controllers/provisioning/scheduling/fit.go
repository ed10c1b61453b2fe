package scheduling

import (
	"fmt"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"
)

// plan is a checked placement of one pod on one bin: what it costs and what it changes.
type plan struct {
	target *bin // the bin the pod goes on
	// unit is the unit price of the placement (sizing.go): 0 on an existing node and within a
	// planned NodeClaim's budget; budget is the planned NodeClaim's budget after it.
	unit, budget float64
	delta        float64 // price added: 0 on an existing node, growth of a planned NodeClaim, price of a new one
	rank         int
	slack        float64 // normalised cpu+memory left on the chosen size; less is a tighter fit
	// For planned NodeClaims: the narrowed requirements (when narrowed), the new options and the
	// index of the cheapest that fits. The NodeClaim requirements are only built when the
	// placement is committed (plan.specOf): the pod's node requirement term (addsTerm, term) and
	// the pinned domains narrow them.
	narrowed      bool
	addsTerm      bool
	term          int
	reqs          requirements.Requirements
	pinnedDomains domainPins
	opts          *optionSet
	optionIndex   int
	minRelaxed    bool
}

// domainPin fixes a topology key of a planned NodeClaim to a domain.
type domainPin struct{ key, domain int32 }

// domainPins are the domains a placement pins, held in the plan itself for the usual one or two
// (a plan is made for every bin a pod is tried on, most of them never committed).
type domainPins struct {
	inline [2]domainPin
	more   []domainPin
	n      int
}

func (d *domainPins) add(pin domainPin) {
	if d.n < len(d.inline) {
		d.inline[d.n] = pin
	} else {
		d.more = append(d.more, pin)
	}
	d.n++
}

// at returns the i-th pin, i < d.n.
func (d *domainPins) at(i int) domainPin {
	if i < len(d.inline) {
		return d.inline[i]
	}
	return d.more[i-len(d.inline)]
}

const priceEpsilon = 1e-9

// better orders placements: less unit price (sizing.go), then as betterDelta.
func (p *plan) better(o *plan) bool {
	switch {
	case p.unit < o.unit-priceEpsilon:
		return true
	case p.unit > o.unit+priceEpsilon:
		return false
	}
	return p.betterDelta(o)
}

// cannotBeat reports whether no placement whose unit price and added price are at least p's can
// be better than o.
func (p *plan) cannotBeat(o *plan) bool {
	return p.unit > o.unit+priceEpsilon || (p.unit >= o.unit-priceEpsilon && p.delta > o.delta+priceEpsilon)
}

// betterDelta orders placements by the price they add: less added price, then rank (existing
// nodes before planned NodeClaims before a new one); among NodeClaims that must grow, the smaller
// one, which spreads growth over the nodes that are there anyway instead of piling it on one;
// then the tighter fit.
func (p *plan) betterDelta(o *plan) bool {
	switch {
	case p.delta < o.delta-priceEpsilon:
		return true
	case p.delta > o.delta+priceEpsilon:
		return false
	case p.rank != o.rank:
		return p.rank < o.rank
	case p.delta > priceEpsilon && p.target.price != o.target.price:
		return p.target.price < o.target.price
	}
	return p.slack < o.slack
}

// slackOf is the cpu and memory left on a node of allocatable alloc once add joins used, each
// measured against the reference shape so that the two are comparable.
func (s *solver) slackOf(used, add *vec, alloc *[numCore]int64) float64 {
	return float64(alloc[resCPU]-used.core[resCPU]-add.core[resCPU])*s.cpuWeight +
		float64(alloc[resMemory]-used.core[resMemory]-add.core[resMemory])*s.memWeight
}

// estimate is a cheap lower bound of the placement of q on b from resources alone: a real
// placement can only narrow the options, which never makes them cheaper. Its unit price is a
// lower bound too: coverage is at most 1, and an opening's target costs at least its cheapest
// option.
func (s *solver) estimate(q *podInfo, b *bin) (plan, bool) {
	if b.existing != nil {
		if !fitsSum(&b.used, &q.requests, &b.capacity) {
			return plan{}, false
		}
		return plan{target: b, rank: b.rank(), slack: s.slackOf(&b.used, &q.requests, &b.capacity.core)}, true
	}
	o := b.opts
	if !fitsCore(&b.used, &q.requests, &o.maxAlloc) {
		return plan{}, false
	}
	idx := o.cheapestFit(b.tmpl, b.first, &b.used, &q.requests)
	if idx < 0 {
		return plan{}, false
	}
	unit := max(o.price[idx]-b.budget, 0)
	if b.id < 0 {
		unit = o.price[idx]
	}
	return plan{target: b, rank: b.rank(), unit: unit, delta: o.price[idx] - b.price, slack: s.slackOf(&b.used, &q.requests, &o.alloc[idx])}, true
}

// refusalReason collects the reason a placement was refused, when the caller wants one; only
// the first reason given is kept.
type refusalReason struct{ reason string }

func (r *refusalReason) set(format string, args ...any) {
	if r != nil && r.reason == "" {
		r.reason = fmt.Sprintf(format, args...)
	}
}

// fit checks every constraint of placing q on b and returns the placement. When refusal is not nil
// it receives the reason of a refusal.
func (s *solver) fit(q *podInfo, b *bin, refusal *refusalReason) (plan, bool) {
	p := plan{target: b, rank: b.rank(), optionIndex: -1}

	// Taints.
	if b.existing != nil {
		hard, soft := untolerated(q.pod.Spec.Tolerations, b.taints)
		if hard != nil {
			if refusal != nil {
				refusal.set("taint %s not tolerated", hard.ToString())
			}
			return p, false
		}
		if soft != nil && q.avoidsPreferNoSchedule() {
			if refusal != nil {
				refusal.set("PreferNoSchedule taint %s avoided while preferences are respected", soft.ToString())
			}
			return p, false
		}
	} else if tol := q.tolerance[b.tmpl.index]; tol == 2 || (tol == 1 && q.avoidsPreferNoSchedule()) {
		if refusal != nil {
			hard, soft := untolerated(q.pod.Spec.Tolerations, b.taints)
			if hard != nil {
				if refusal != nil {
					refusal.set("taint %s not tolerated", hard.ToString())
				}
			} else {
				if refusal != nil {
					refusal.set("PreferNoSchedule taint %s avoided while preferences are respected", soft.ToString())
				}
			}
		}
		return p, false
	}

	// Host ports.
	for _, qp := range q.ports {
		for _, bp := range b.ports {
			if qp.conflicts(bp) {
				if refusal != nil {
					refusal.set("host port %d/%s already used on the node", qp.port, qp.protocol)
				}
				return p, false
			}
		}
	}

	// Node requirements: the first alternative the node can satisfy.
	term := -1
	var first requirements.Conflict
	for i := range q.active {
		var c requirements.Conflict
		bad := false
		if b.existing != nil {
			c, bad = b.reqs.FirstIncompatibility(q.active[i])
		} else {
			if hr, ok := q.active[i].Get(karpv1.LabelHostname); ok && !hr.Matches(b.hostname, true) {
				c, bad = requirements.Conflict{Key: karpv1.LabelHostname, Want: hr, Missing: true}, true
			} else {
				c, bad = b.reqs.FirstIncompatibility(q.activeNoHost[i])
			}
		}
		if !bad {
			term = i
			break
		}
		if i == 0 {
			first = c
		}
	}
	if term < 0 {
		if refusal != nil {
			refusal.set("%s", first.Error())
		}
		return p, false
	}
	reqs := b.reqs
	if b.isNew() {
		// p.opts tracks the options of reqs while it is known without a lookup.
		p.opts = b.opts
		if q.activeNoHost[term].Len() > 0 && reqs.Add(q.activeNoHost[term].Items()...) {
			p.narrowed, p.addsTerm, p.term = true, true, term
			p.opts = nil
		}
	}

	// Topology.
	if !s.fitsTopology(q, b, &reqs, &p, refusal) {
		return p, false
	}

	// Price, options, minValues and limits of a planned NodeClaim.
	if b.existing != nil {
		p.slack = s.slackOf(&b.used, &q.requests, &b.capacity.core)
		return p, true
	}
	t := b.tmpl
	opts, from := b.opts, b.first
	if p.narrowed {
		if p.opts == nil {
			p.opts = t.optionsFor(reqs)
		}
		opts, from = p.opts, 0
	}
	idx := opts.cheapestFit(t, from, &b.used, &q.requests)
	if idx < 0 {
		if refusal != nil {
			need := b.used.plus(q.requests)
			if p.narrowed {
				if refusal != nil {
					refusal.set("no instance type compatible with %s has %s free for the pod and what is already planned", reqs, describeVec(need))
				}
			} else {
				if refusal != nil {
					refusal.set("no instance type has %s allocatable for the pod and the DaemonSets that would run with it", describeVec(need))
				}
			}
		}
		return p, false
	}
	if t.minValues {
		need := b.used.plus(q.requests)
		if err := t.fittingTypes(opts, idx, &need).SatisfiesMinValues(reqs); err != nil {
			if s.opts.MinValuesPolicy != MinValuesPolicyBestEffort {
				if refusal != nil {
					refusal.set("%s", err.Error())
				}
				return p, false
			}
			p.minRelaxed = true
		}
	}
	if t.limits.any() {
		var before vec
		newClaims := int64(1)
		if b.id >= 0 {
			before, newClaims = t.instanceTypes[b.opts.typeIndices[b.first]].capacity, 0
		}
		if ok, which := t.limits.allows(&before, &t.instanceTypes[opts.typeIndices[idx]].capacity, newClaims); !ok {
			if refusal != nil {
				refusal.set("its limits would be exceeded (%s)", which)
			}
			return p, false
		}
	}
	p.reqs, p.opts, p.optionIndex = reqs, opts, idx
	p.delta = opts.price[idx] - b.price
	p.slack = s.slackOf(&b.used, &q.requests, &opts.alloc[idx])
	if b.id < 0 {
		// An opening: sizeOpening chooses its target when the caller needs it.
		p.unit, p.budget = opts.price[idx], opts.price[idx]
	} else {
		p.unit, p.budget = s.growthUnit(q, b, opts, idx), max(b.budget, opts.price[idx])
	}
	return p, true
}

// specOf returns the NodeClaim requirements of the planned NodeClaim after placing q by p: its
// own, narrowed by the pod's node requirement term and the domains p pins.
func (s *solver) specOf(q *podInfo, p *plan) requirements.Requirements {
	spec := p.target.spec
	if p.addsTerm {
		spec.Add(q.activeNoHost[p.term].Items()...)
	}
	for i := range p.pinnedDomains.n {
		pin := p.pinnedDomains.at(i)
		key := s.topo.keys[pin.key]
		spec.Add(requirements.In(key.name, key.domains[pin.domain]))
	}
	return spec
}
