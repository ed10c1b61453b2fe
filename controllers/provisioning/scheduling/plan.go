package scheduling

import (
	"github.com/joiner-dev/joiner/requirements"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
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
	if c := comparePrice(p.unit, o.unit); c != 0 {
		return c < 0
	}
	return p.betterDelta(o)
}

// comparePrice compares two prices, taking those within priceEpsilon as equal: -1 when a is
// less, 1 when it is more, else 0.
func comparePrice(a, b float64) int {
	switch {
	case a < b-priceEpsilon:
		return -1
	case a > b+priceEpsilon:
		return 1
	}
	return 0
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
	if c := comparePrice(p.delta, o.delta); c != 0 {
		return c < 0
	}
	switch {
	case p.rank != o.rank:
		return p.rank < o.rank
	case p.delta > priceEpsilon && p.target.price != o.target.price:
		return p.target.price < o.target.price
	}
	return p.slack < o.slack
}

// slackOf is the cpu and memory left on a node of allocatable alloc once add joins used, each
// measured against the reference shape so that the two are comparable.
func (s *solver) slackOf(used, add *resources.Vec, alloc *[resources.NumCore]int64) float64 {
	return float64(alloc[resources.CPU]-used.Core[resources.CPU]-add.Core[resources.CPU])*s.cpuWeight +
		float64(alloc[resources.Memory]-used.Core[resources.Memory]-add.Core[resources.Memory])*s.memWeight
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
		key := s.topo.Keys[pin.key]
		spec.Add(requirements.In(key.Name, key.Domains[pin.domain]))
	}
	return spec
}
