package scheduling

import (
	"fmt"
	"slices"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// commit applies a placement.
func (s *solver) commit(q *podInfo, p *plan) {
	b := p.target
	if b.id < 0 {
		b = s.openClaim(b.tmpl)
	}
	if b.isNew() {
		t := b.tmpl
		if t.limits.any() {
			var before resources.Vec
			if len(b.placed) > 0 {
				before = t.instanceTypes[b.opts.typeIndices[b.first]].capacity
			} else {
				t.limits.claims++
			}
			t.limits.reserved = t.limits.reserved.Minus(before).Plus(t.instanceTypes[p.opts.typeIndices[p.optionIndex]].capacity)
		}
		if p.narrowed {
			b.reqs, b.spec = p.reqs, s.specOf(q, p)
			b.domains = slices.Clone(b.domains)
			for i := range p.pinnedDomains.n {
				pinned := p.pinnedDomains.at(i)
				b.domains[pinned.key] = pinned.domain
			}
			for k, d := range s.domainsOf(b.reqs) {
				if b.domains[k] < 0 {
					b.domains[k] = d
				}
			}
		}
		b.opts, b.first, b.price = p.opts, p.optionIndex, p.opts.price[p.optionIndex]
		b.budget = max(p.budget, b.price)
		b.minRelaxed = b.minRelaxed || p.minRelaxed
	}
	b.used = b.used.Plus(q.requests)
	b.ports = append(b.ports, q.ports...)
	b.placed = append(b.placed, q)
	for _, g := range q.selectedBy {
		s.count(b, g)
	}
	for _, o := range q.ownedGroups {
		s.countOwner(b, o.group)
	}
	s.reindex(b)
}

// openClaim turns the template's prospective NodeClaim into a planned one.
func (s *solver) openClaim(t *template) *bin {
	s.claims++
	fresh := s.fresh[t.index]
	b := &bin{
		id:       int32(len(s.bins)),
		tmpl:     t,
		hostname: fmt.Sprintf("%s-planned-%d", t.name, s.claims),
		reqs:     fresh.reqs,
		spec:     fresh.spec,
		domains:  fresh.domains,
		used:     fresh.used,
		opts:     fresh.opts,
		taints:   fresh.taints,
	}
	s.bins = append(s.bins, b)
	return b
}
