package scheduling

import (
	"cmp"
	"slices"

	"github.com/joiner-dev/joiner/requirements"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/topology"
)

// selfSelected reports whether the pod counts for group g itself.
func (q *podInfo) selfSelected(g int32) bool { return slices.Contains(q.selectedBy, g) }

// fitsTopology checks the pod's topology constraints (and those of placed pods that select it) on
// b, fixing the open topology domains of a planned NodeClaim in reqs and p.pinnedDomains: first
// the groups whose domain is the node itself, then every other key of the pod.
func (s *solver) fitsTopology(q *podInfo, b *bin, reqs *requirements.Requirements, p *plan, refusal *refusalReason) bool {
	return len(q.activeGroups)+len(q.selectedBy)+len(q.keys) == 0 || s.topologyAllows(q, b, reqs, p, refusal)
}

// topologyAllows is fitsTopology for a pod with topology constraints or selected by some.
func (s *solver) topologyAllows(q *podInfo, b *bin, reqs *requirements.Requirements, p *plan, refusal *refusalReason) bool {
	if !s.fitsOwnHostnameGroups(q, b, refusal) || !s.fitsOthersHostnameGroups(q, b, refusal) {
		return false
	}
	for _, k := range q.keys {
		if !s.fitsKey(q, b, k, reqs, p, refusal) {
			return false
		}
	}
	return true
}

// fitsOwnHostnameGroups checks the pod's own hostname groups: the domain is the bin.
func (s *solver) fitsOwnHostnameGroups(q *podInfo, b *bin, refusal *refusalReason) bool {
	for _, g := range q.activeGroups {
		grp := s.topo.Groups[g]
		if grp.Key != topology.HostnameKey {
			continue
		}
		n := topology.CountOf(b.counts, g)
		if grp.OwnRefuses(topology.HostnameKey, n, q.selfSelected(g)) {
			if refusal != nil {
				refusal.set("%s", grp.NodeRefusal(n, q.selfSelected(g)))
			}
			return false
		}
	}
	return true
}

// fitsOthersHostnameGroups checks the hostname groups that select the pod and are declared by a
// pod on b.
func (s *solver) fitsOthersHostnameGroups(q *podInfo, b *bin, refusal *refusalReason) bool {
	for _, g := range q.selectedBy {
		grp := s.topo.Groups[g]
		if grp.Key != topology.HostnameKey || topology.CountOf(b.owners, g) == 0 {
			continue
		}
		if grp.OthersRefuseNode(topology.CountOf(b.counts, g), q.keepsOthersSpread()) {
			if refusal != nil {
				if grp.Kind == topology.Spread {
					refusal.set("a pod on the node has %s, which the pod would break", grp.Describe())
				} else {
					refusal.set("a pod on the node has %s, which selects the pod", grp.Describe())
				}
			}
			return false
		}
	}
	return true
}

// fitsKey checks topology key k on b: the domain b has, the one the narrowed requirements fix, or,
// for a planned NodeClaim where it is still open, the domain it pins.
func (s *solver) fitsKey(q *podInfo, b *bin, k int32, reqs *requirements.Requirements, p *plan, refusal *refusalReason) bool {
	key := s.topo.Keys[k]
	d := b.domains[k]
	if d < 0 && p.narrowed {
		if r, ok := reqs.Get(key.Name); ok {
			if v, single := r.Single(); single {
				d = key.Index[v]
			}
		}
	}
	if d >= 0 {
		if g := s.domainRefusal(q, k, d); g >= 0 {
			if refusal != nil {
				refusal.set("%s not satisfied in %s=%s", s.topo.Groups[g].Describe(), key.Name, key.Domains[d])
			}
			return false
		}
		return true
	}
	if b.existing != nil {
		if refusal != nil {
			refusal.set("the node has no %s label, which the pod's topology needs", key.Name)
		}
		return false
	}
	return s.pinDomain(q, b, k, reqs, p, refusal)
}

// domainCandidate is an allowed domain of an open key with its score (domainScore).
type domainCandidate struct {
	domain int32
	score  int64
}

// pinDomain chooses the domain of the open key k of the planned NodeClaim b: the best-scored
// domain that still leaves an instance type for the pod (a zone may lack the capacity type the pod
// needs, for instance).
func (s *solver) pinDomain(q *podInfo, b *bin, k int32, reqs *requirements.Requirements, p *plan, refusal *refusalReason) bool {
	key := s.topo.Keys[k]
	r, defined := reqs.Get(key.Name)
	if !defined {
		if refusal != nil {
			refusal.set("its nodes carry no %s label, which the pod's topology needs", key.Name)
		}
		return false
	}
	var buf [8]domainCandidate // most keys have few domains: no allocation
	candidates, refusingGroup := s.domainCandidates(q, k, r, buf[:0])
	for _, c := range candidates {
		var opts *optionSet
		if p.opts != nil {
			opts = b.tmpl.pinnedOptions(p.opts, key.Name, key.Domains[c.domain])
		} else {
			trial := *reqs
			trial.Add(requirements.In(key.Name, key.Domains[c.domain]))
			opts = b.tmpl.optionsFor(trial)
		}
		if opts.cheapestFit(b.tmpl, 0, &b.used, &q.requests) >= 0 {
			*reqs = opts.reqs
			p.opts = opts
			p.narrowed = true
			p.pinnedDomains.add(domainPin{key: k, domain: c.domain})
			return true
		}
	}
	if refusal != nil {
		switch {
		case len(candidates) > 0:
			refusal.set("no %s that the pod's topology allows has an instance type for it", key.Name)
		case refusingGroup >= 0:
			refusal.set("%s not satisfied in any %s it allows (%s)", s.topo.Groups[refusingGroup].Describe(), key.Name, r)
		default:
			refusal.set("no %s domain is allowed (%s)", key.Name, r)
		}
	}
	return false
}

// domainCandidates appends to out the domains of key k that r allows and the pod's topology
// accepts, best score first, and returns the last group that refused a domain r allows (-1 when
// none did).
func (s *solver) domainCandidates(q *podInfo, k int32, r requirements.Requirement, out []domainCandidate) ([]domainCandidate, int32) {
	refusingGroup := int32(-1)
	for dom, v := range s.topo.Keys[k].Domains {
		if !r.Has(v) {
			continue
		}
		if g := s.domainRefusal(q, k, int32(dom)); g >= 0 {
			refusingGroup = g
			continue
		}
		out = append(out, domainCandidate{int32(dom), s.domainScore(q, k, int32(dom))})
	}
	slices.SortStableFunc(out, func(a, b domainCandidate) int { return cmp.Compare(a.score, b.score) })
	return out, refusingGroup
}

// domainRefusal returns the group that forbids placing q in domain d of key k, or -1.
func (s *solver) domainRefusal(q *podInfo, k, d int32) int32 {
	groups := s.topo.Groups
	for _, g := range q.activeGroups {
		if grp := groups[g]; grp.Key == k && grp.OwnRefuses(d, grp.Counts[d], q.selfSelected(g)) {
			return g
		}
	}
	if len(q.selectedBy) == 0 {
		return -1
	}
	keepSpread := q.keepsOthersSpread()
	for _, g := range q.selectedBy {
		if grp := groups[g]; grp.Key == k && grp.OthersRefuseDomain(d, keepSpread) {
			return g
		}
	}
	return -1
}

// domainScore ranks the allowed domains of an open key: fewer pods counted by the pod's spread
// constraints and by the spreads that select it is better.
func (s *solver) domainScore(q *podInfo, k, d int32) int64 {
	score := int64(0)
	for _, g := range q.activeGroups {
		if grp := s.topo.Groups[g]; grp.Key == k && grp.Kind == topology.Spread {
			score += int64(grp.Counts[d]) << 16
		}
	}
	for _, g := range q.selectedBy {
		if grp := s.topo.Groups[g]; grp.Key == k && grp.Kind == topology.Spread {
			score += int64(grp.Counts[d])
		}
	}
	return score
}
