package scheduling

import (
	"cmp"
	"context"
	"slices"
)

// The improvement pass runs after every pod is placed. Greedy packing leaves some planned
// NodeClaims just over a size boundary. The pass moves a pod off a NodeClaim when another node
// takes it for less than the NodeClaim saves, and moves several pods off a NodeClaim into room
// other nodes already pay for when that lets it drop a size. Every move keeps every constraint;
// the pass stops when a sweep moves nothing.

// maxImprovementSweeps bounds the pass; each sweep visits every planned NodeClaim once.
const maxImprovementSweeps = 8

// improve moves pods between nodes while that lowers the price of the planned NodeClaims.
func (s *solver) improve(ctx context.Context) {
	for sweep := 0; sweep < maxImprovementSweeps; sweep++ {
		moved := false
		for _, src := range s.bins[s.existingCount:] {
			if ctx.Err() != nil {
				return
			}
			if len(src.placed) == 0 {
				continue
			}
			if s.improveFrom(src) {
				moved = true
			}
			if len(src.placed) > 1 && s.shrink(src) {
				moved = true
			}
		}
		if !moved {
			return
		}
	}
}

// improveFrom tries each pod of src, last placed (smallest) first, on every other node, and makes
// each move that lowers the total price. It reports whether it moved a pod.
func (s *solver) improveFrom(src *bin) bool {
	moved := false
	for i := len(src.placed) - 1; i >= 0; i-- {
		if i >= len(src.placed) {
			continue
		}
		q := src.placed[i]
		saving := src.price - s.priceWithout(src, q)
		if saving <= priceEpsilon {
			continue
		}
		if s.moveSomewhere(q, src, saving) {
			moved = true
		}
	}
	return moved
}

// priceWithout is the price of the planned NodeClaim src without pod q (0 when q is its only pod).
func (s *solver) priceWithout(src *bin, q *podInfo) float64 {
	if len(src.placed) == 1 {
		return 0
	}
	left := src.used.minus(q.requests)
	var zero vec
	idx := src.opts.cheapestFit(src.tmpl, 0, &left, &zero)
	return src.opts.priceOf(idx)
}

// moveSomewhere moves q from src to the node where it adds the least price, if that is less than
// saving and every constraint still holds. It reports whether it moved q.
func (s *solver) moveSomewhere(q *podInfo, src *bin, saving float64) bool {
	undo := s.remove(q, src)
	best, found := s.bestTarget(q, src, saving-priceEpsilon)
	if !found {
		undo()
		return false
	}
	s.commit(q, &best)
	return true
}

// remove takes q off the planned NodeClaim src and returns a function that puts it back exactly.
func (s *solver) remove(q *podInfo, src *bin) (undo func()) {
	at := slices.Index(src.placed, q)
	saved := struct {
		used     vec
		first    int
		price    float64
		ports    []hostPort
		reserved vec
	}{src.used, src.first, src.price, src.ports, src.tmpl.limits.reserved}
	t := src.tmpl
	src.placed = slices.Delete(src.placed, at, at+1)
	src.used = src.used.minus(q.requests)
	src.ports = nil
	for _, p := range src.placed {
		src.ports = append(src.ports, p.ports...)
	}
	for _, g := range q.selectedBy {
		s.uncount(src, g)
	}
	for _, o := range q.ownedGroups {
		s.uncountOwner(src, o.group)
	}
	oldCapacity := t.instanceTypes[src.opts.typeIndices[src.first]].capacity
	if len(src.placed) == 0 {
		src.price = 0
		if t.limits.any() {
			t.limits.reserved = t.limits.reserved.minus(oldCapacity)
			t.limits.claims--
		}
	} else {
		var zero vec
		src.first = src.opts.cheapestFit(t, 0, &src.used, &zero)
		src.price = src.opts.price[src.first]
		if t.limits.any() {
			t.limits.reserved = t.limits.reserved.minus(oldCapacity).plus(t.instanceTypes[src.opts.typeIndices[src.first]].capacity)
		}
	}
	return func() {
		if len(src.placed) == 0 && t.limits.any() {
			t.limits.claims++
		}
		src.placed = slices.Insert(src.placed, at, q)
		src.used, src.first, src.price, src.ports = saved.used, saved.first, saved.price, saved.ports
		t.limits.reserved = saved.reserved
		for _, g := range q.selectedBy {
			s.count(src, g)
		}
		for _, o := range q.ownedGroups {
			s.countOwner(src, o.group)
		}
	}
}

// uncount and uncountOwner reverse count and countOwner.
func (s *solver) uncount(b *bin, g int32) {
	grp := s.topo.groups[g]
	grp.total--
	if grp.key == hostnameKey {
		b.counts = decCount(b.counts, g)
		return
	}
	if d := b.domains[grp.key]; d >= 0 {
		grp.counts[d]--
	}
}

func (s *solver) uncountOwner(b *bin, g int32) {
	grp := s.topo.groups[g]
	if grp.key == hostnameKey {
		b.owners = decCount(b.owners, g)
		return
	}
	if d := b.domains[grp.key]; d >= 0 {
		grp.owners[d]--
	}
}

func decCount(cs []groupCount, g int32) []groupCount {
	for i := range cs {
		if cs[i].group == g {
			cs[i].count--
			return cs
		}
	}
	return cs
}

// removalKeepsOthers checks what taking q off src (already done) and placing it by p does to the
// constraints of the pods that stay: an affinity whose only selected pod in src's domain was q,
// or a spread whose skew the move raises.
func (s *solver) removalKeepsOthers(q *podInfo, src *bin, p *plan) bool {
	for _, g := range q.selectedBy {
		grp := s.topo.groups[g]
		if grp.key == hostnameKey {
			if grp.kind == kindAffinity && countOf(src.counts, g) == 0 && countOf(src.owners, g) > 0 {
				return false
			}
			continue
		}
		from := src.domains[grp.key]
		to := s.domainAfter(p, grp.key)
		if from < 0 || from == to {
			continue
		}
		switch grp.kind {
		case kindAffinity:
			if grp.counts[from] == 0 && grp.owners[from] > 0 {
				return false
			}
		case kindSpread:
			low := grp.minCount(to, 1)
			for d, owners := range grp.owners {
				n := grp.counts[d]
				if int32(d) == to {
					n++
					if q.ownsHard(g) {
						owners++
					}
				}
				if owners > 0 && n-low > grp.maxSkew {
					return false
				}
			}
		}
	}
	return true
}

// domainAfter is the domain of key the placement puts the pod in, or -1.
func (s *solver) domainAfter(p *plan, key int32) int32 {
	for _, pinned := range p.pinnedDomains {
		if pinned.key == key {
			return pinned.domain
		}
	}
	if d := p.target.domains[key]; d >= 0 {
		return d
	}
	if p.narrowed {
		if r, ok := p.reqs.Get(s.topo.keys[key].name); ok {
			if v, single := r.Single(); single {
				return s.topo.keys[key].index[v]
			}
		}
	}
	return -1
}

// ownsHard reports whether the pod declares group g as a hard constraint.
func (q *podInfo) ownsHard(g int32) bool {
	for _, o := range q.ownedGroups {
		if o.group == g {
			return true
		}
	}
	return false
}

// shrink moves pods off the planned NodeClaim src, largest first, into room other nodes already
// pay for, until src drops to a cheaper size. When it cannot get there, every move is undone.
func (s *solver) shrink(src *bin) bool {
	start := src.price
	candidates := slices.Clone(src.placed)
	slices.SortStableFunc(candidates, func(a, b *podInfo) int {
		return cmp.Compare(b.size, a.size)
	})
	var undos []func()
	for _, q := range candidates {
		if src.price < start-priceEpsilon || len(src.placed) <= 1 {
			break
		}
		undoRemove := s.remove(q, src)
		best, found := s.bestTarget(q, src, 2*priceEpsilon)
		if !found {
			undoRemove()
			continue
		}
		undos = append(undos, undoRemove, s.commitUndoable(q, &best))
	}
	if src.price < start-priceEpsilon {
		return true
	}

	for i := len(undos) - 1; i >= 0; i-- {
		undos[i]()
	}
	return false
}

// bestTarget finds where q (already removed from src) adds the least price, if that is below
// limit.
func (s *solver) bestTarget(q *podInfo, src *bin, limit float64) (plan, bool) {
	var best plan
	found := false
	free := limit <= 2*priceEpsilon // only room already paid for will do
	for _, b := range s.bins {
		if b == src || (b.isNew() && len(b.placed) == 0) {
			continue
		}
		if free && b.isNew() && !fitsCore(&b.used, &q.requests, &b.opts.alloc[b.first]) {
			continue
		}
		est, ok := s.estimate(q, b)
		if !ok || est.delta >= limit || (found && !est.better(&best)) {
			continue
		}
		p, ok := s.fit(q, b, nil)
		if !ok || p.delta >= limit || (found && !p.better(&best)) {
			continue
		}
		if !s.removalKeepsOthers(q, src, &p) {
			continue
		}
		best, found = p, true
	}
	return best, found
}

// commitUndoable commits a placement on a node that already has pods (or is an existing node)
// and returns a function that reverses it exactly.
func (s *solver) commitUndoable(q *podInfo, p *plan) (undo func()) {
	b := p.target
	saved := *b
	var limitsSaved limits
	if b.tmpl != nil {
		limitsSaved = b.tmpl.limits
	}
	s.commit(q, p)
	return func() {
		for _, g := range q.selectedBy {
			s.uncount(b, g)
		}
		for _, o := range q.ownedGroups {
			s.uncountOwner(b, o.group)
		}
		counts, owners := b.counts, b.owners
		*b = saved
		b.counts, b.owners = counts, owners
		if b.tmpl != nil {
			b.tmpl.limits = limitsSaved
		}
	}
}
