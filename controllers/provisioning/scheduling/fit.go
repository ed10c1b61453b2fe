package scheduling

import (
	"fmt"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"
)

// plan is a checked placement of one pod on one bin: what it costs and what it changes.
type plan struct {
	target *bin    // the bin the pod goes on
	delta  float64 // price added: 0 on an existing node, growth of a planned NodeClaim, price of a new one
	rank   int
	slack  float64 // normalised cpu+memory left on the chosen size; less is a tighter fit
	// For planned NodeClaims: the narrowed requirements (when narrowed), the new options and the
	// index of the cheapest that fits.
	narrowed      bool
	reqs, spec    requirements.Requirements
	pinnedDomains []domainPin
	opts          *optionSet
	optionIndex   int
	minRelaxed    bool
}

// domainPin fixes a topology key of a planned NodeClaim to a domain.
type domainPin struct{ key, domain int32 }

const priceEpsilon = 1e-9

// better orders placements: less added price, then rank (existing nodes before planned
// NodeClaims before a new one); among NodeClaims that must grow, the smaller one, which spreads
// growth over the nodes that are there anyway instead of piling it on one; then the tighter fit.
func (p *plan) better(o *plan) bool {
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
// placement can only narrow the options, which never makes them cheaper.
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
	return plan{target: b, rank: b.rank(), delta: o.price[idx] - b.price, slack: s.slackOf(&b.used, &q.requests, &o.alloc[idx])}, true
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
	reqs, spec := b.reqs, b.spec
	if b.isNew() {
		// p.opts tracks the options of reqs while it is known without a lookup.
		p.opts = b.opts
		if q.activeNoHost[term].Len() > 0 && reqs.Add(q.activeNoHost[term].Items()...) {
			p.narrowed = true
			p.opts = nil
			spec.Add(q.activeNoHost[term].Items()...)
		}
	}

	// Topology.
	if !s.fitsTopology(q, b, &reqs, &spec, &p, refusal) {
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
	p.reqs, p.spec, p.opts, p.optionIndex = reqs, spec, opts, idx
	p.delta = opts.price[idx] - b.price
	p.slack = s.slackOf(&b.used, &q.requests, &opts.alloc[idx])
	return p, true
}
