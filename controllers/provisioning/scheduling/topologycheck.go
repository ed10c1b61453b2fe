package scheduling

import (
	"cmp"
	"slices"

	"github.com/joiner-dev/joiner/requirements"
)

// selfSelected reports whether the pod counts for group g itself.
func (q *podInfo) selfSelected(g int32) bool { return slices.Contains(q.selectedBy, g) }

// fitsTopology checks the pod's topology constraints (and those of placed pods that select it) on
// b, fixing the open topology domains of a planned NodeClaim in reqs and p.pinnedDomains.
func (s *solver) fitsTopology(q *podInfo, b *bin, reqs *requirements.Requirements, p *plan, refusal *refusalReason) bool {
	groups := s.topo.groups
	// Hostname groups: the domain is the bin.
	for _, g := range q.activeGroups {
		grp := groups[g]
		if grp.key != hostnameKey {
			continue
		}
		n := countOf(b.counts, g)
		switch grp.kind {
		case kindSpread:
			if q.selfSelected(g) {
				n++
			}
			if n > grp.maxSkew {
				if refusal != nil {
					refusal.set("%s would reach skew %d on the node", grp.describe(), n)
				}
				return false
			}
		case kindAffinity:
			if n == 0 && !(grp.total == 0 && q.selfSelected(g)) {
				if refusal != nil {
					refusal.set("%s: no selected pod on the node", grp.describe())
				}
				return false
			}
		case kindAntiAffinity:
			if n > 0 {
				if refusal != nil {
					refusal.set("%s: a selected pod is already on the node", grp.describe())
				}
				return false
			}
		}
	}
	for _, g := range q.selectedBy {
		grp := groups[g]
		if grp.key != hostnameKey || countOf(b.owners, g) == 0 {
			continue
		}
		switch grp.kind {
		case kindSpread:
			if q.keepsOthersSpread() && countOf(b.counts, g)+1 > grp.maxSkew {
				if refusal != nil {
					refusal.set("a pod on the node has %s, which the pod would break", grp.describe())
				}
				return false
			}
		case kindAntiAffinity:
			if refusal != nil {
				refusal.set("a pod on the node has %s, which selects the pod", grp.describe())
			}
			return false
		}
	}

	// Other keys: check the fixed domain, or choose one for an open planned NodeClaim.
	for _, k := range q.keys {
		key := s.topo.keys[k]
		d := b.domains[k]
		if d < 0 && p.narrowed {
			if r, ok := reqs.Get(key.name); ok {
				if v, single := r.Single(); single {
					d = key.index[v]
				}
			}
		}
		if d >= 0 {
			if g := s.domainRefusal(q, k, d); g >= 0 {
				if refusal != nil {
					refusal.set("%s not satisfied in %s=%s", groups[g].describe(), key.name, key.domains[d])
				}
				return false
			}
			continue
		}
		if b.existing != nil {
			if refusal != nil {
				refusal.set("the node has no %s label, which the pod's topology needs", key.name)
			}
			return false
		}
		r, defined := reqs.Get(key.name)
		if !defined {
			if refusal != nil {
				refusal.set("its nodes carry no %s label, which the pod's topology needs", key.name)
			}
			return false
		}
		type candidate struct {
			domain int32
			score  int64
		}
		var buf [8]candidate // most keys have few domains: no allocation
		candidates := buf[:0]
		refusingGroup := int32(-1)
		for dom, v := range key.domains {
			if !r.Has(v) {
				continue
			}
			if g := s.domainRefusal(q, k, int32(dom)); g >= 0 {
				refusingGroup = g
				continue
			}
			candidates = append(candidates, candidate{int32(dom), s.domainScore(q, k, int32(dom))})
		}
		slices.SortStableFunc(candidates, func(a, b candidate) int { return cmp.Compare(a.score, b.score) })
		// The best-scored domain that still leaves an instance type for the pod (a zone may lack
		// the capacity type the pod needs, for instance).
		best := int32(-1)
		var pinnedOpts *optionSet
		for _, c := range candidates {
			var opts *optionSet
			if p.opts != nil {
				opts = b.tmpl.pinnedOptions(p.opts, key.name, key.domains[c.domain])
			} else {
				trial := *reqs
				trial.Add(requirements.In(key.name, key.domains[c.domain]))
				opts = b.tmpl.optionsFor(trial)
			}
			if opts.cheapestFit(b.tmpl, 0, &b.used, &q.requests) >= 0 {
				best, pinnedOpts = c.domain, opts
				break
			}
		}
		if best < 0 {
			if refusal != nil {
				switch {
				case len(candidates) > 0:
					refusal.set("no %s that the pod's topology allows has an instance type for it", key.name)
				case refusingGroup >= 0:
					refusal.set("%s not satisfied in any %s it allows (%s)", groups[refusingGroup].describe(), key.name, r)
				default:
					refusal.set("no %s domain is allowed (%s)", key.name, r)
				}
			}
			return false
		}
		*reqs = pinnedOpts.reqs
		p.opts = pinnedOpts
		p.narrowed = true
		p.pinnedDomains.add(domainPin{key: k, domain: best})
	}
	return true
}

// domainRefusal returns the group that forbids placing q in domain d of key k, or -1.
func (s *solver) domainRefusal(q *podInfo, k, d int32) int32 {
	groups := s.topo.groups
	for _, g := range q.activeGroups {
		grp := groups[g]
		if grp.key != k {
			continue
		}
		n := grp.counts[d]
		switch grp.kind {
		case kindSpread:
			if grp.eligible != nil && !grp.eligible[d] {
				return g
			}
			if q.selfSelected(g) {
				n++
			}
			if n-grp.minCount(-1, 0) > grp.maxSkew {
				return g
			}
		case kindAffinity:
			if n == 0 && !(grp.total == 0 && q.selfSelected(g)) {
				return g
			}
		case kindAntiAffinity:
			if n > 0 {
				return g
			}
		}
	}
	for _, g := range q.selectedBy {
		grp := groups[g]
		if grp.key != k {
			continue
		}
		switch grp.kind {
		case kindSpread:
			// Kept balanced everywhere, not only where its owners are, so that an owner placed
			// later always finds a domain at the minimum.
			if grp.hard && q.keepsOthersSpread() && grp.counts[d]+1-grp.minCount(d, 1) > grp.maxSkew {
				return g
			}
		case kindAntiAffinity:
			if grp.owners[d] > 0 {
				return g
			}
		}
	}
	return -1
}

// domainScore ranks the allowed domains of an open key: fewer pods counted by the pod's spread
// constraints and by the spreads that select it is better.
func (s *solver) domainScore(q *podInfo, k, d int32) int64 {
	score := int64(0)
	for _, g := range q.activeGroups {
		if grp := s.topo.groups[g]; grp.key == k && grp.kind == kindSpread {
			score += int64(grp.counts[d]) << 16
		}
	}
	for _, g := range q.selectedBy {
		if grp := s.topo.groups[g]; grp.key == k && grp.kind == kindSpread {
			score += int64(grp.counts[d])
		}
	}
	return score
}
