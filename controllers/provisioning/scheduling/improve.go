package scheduling

import (
	"cmp"
	"context"
	"slices"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/topology"
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
	s.useIndex() // decided once: trying a move must not build the index (remove leaves src as it was)
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
	left := src.used.Minus(q.requests)
	var zero resources.Vec
	idx := src.opts.cheapestFit(src.tmpl, 0, &left, &zero)
	return src.opts.priceOf(idx)
}

// moveSomewhere moves q from src to the node where it adds the least price, if that is less than
// saving and every constraint still holds. It reports whether it moved q.
func (s *solver) moveSomewhere(q *podInfo, src *bin, saving float64) bool {
	r := s.remove(q, src)
	best, found := s.bestTarget(q, src, saving-priceEpsilon)
	if !found {
		s.undoRemove(&r)
		return false
	}
	s.commit(q, &best)
	s.reindex(src)
	return true
}

// removal is what undoRemove needs to put a pod back exactly where remove took it from.
type removal struct {
	q        *podInfo
	src      *bin
	at       int
	used     resources.Vec
	first    int
	price    float64
	ports    []hostPort
	reserved resources.Vec
}

// remove takes q off the planned NodeClaim src; undoRemove puts it back exactly. It leaves src
// where it was in the bin index, so that trying a move costs no reindexing: a search for where q
// goes skips src anyway, and the caller reindexes src once a move is kept.
func (s *solver) remove(q *podInfo, src *bin) removal {
	t := src.tmpl
	r := removal{q: q, src: src, at: slices.Index(src.placed, q), used: src.used, first: src.first, price: src.price, ports: src.ports, reserved: t.limits.reserved}
	src.placed = slices.Delete(src.placed, r.at, r.at+1)
	src.used = src.used.Minus(q.requests)
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
			t.limits.reserved = t.limits.reserved.Minus(oldCapacity)
			t.limits.claims--
		}
	} else {
		var zero resources.Vec
		src.first = src.opts.cheapestFit(t, 0, &src.used, &zero)
		src.price = src.opts.price[src.first]
		if t.limits.any() {
			t.limits.reserved = t.limits.reserved.Minus(oldCapacity).Plus(t.instanceTypes[src.opts.typeIndices[src.first]].capacity)
		}
	}
	return r
}

// undoRemove puts back the pod r took off.
func (s *solver) undoRemove(r *removal) {
	src, q, t := r.src, r.q, r.src.tmpl
	if len(src.placed) == 0 && t.limits.any() {
		t.limits.claims++
	}
	src.placed = slices.Insert(src.placed, r.at, q)
	src.used, src.first, src.price, src.ports = r.used, r.first, r.price, r.ports
	t.limits.reserved = r.reserved
	for _, g := range q.selectedBy {
		s.count(src, g)
	}
	for _, o := range q.ownedGroups {
		s.countOwner(src, o.group)
	}
}

// removalKeepsOthers checks what taking q off src (already done) and placing it by p does to the
// constraints of the pods that stay: an affinity whose only selected pod in src's domain was q,
// or a spread whose skew the move raises.
func (s *solver) removalKeepsOthers(q *podInfo, src *bin, p *plan) bool {
	for _, g := range q.selectedBy {
		grp := s.topo.Groups[g]
		if grp.Key == topology.HostnameKey {
			if grp.Kind == topology.Affinity && topology.CountOf(src.counts, g) == 0 && topology.CountOf(src.owners, g) > 0 {
				return false
			}
			continue
		}
		from := src.domains[grp.Key]
		to := s.domainAfter(p, grp.Key)
		if from < 0 || from == to {
			continue
		}
		switch grp.Kind {
		case topology.Affinity:
			if grp.Counts[from] == 0 && grp.Owners[from] > 0 {
				return false
			}
		case topology.Spread:
			low := grp.MinCount(to, 1)
			for d, owners := range grp.Owners {
				n := grp.Counts[d]
				if int32(d) == to {
					n++
					if q.ownsHard(g) {
						owners++
					}
				}
				if owners > 0 && n-low > grp.MaxSkew {
					return false
				}
			}
		}
	}
	return true
}

// domainAfter is the domain of key the placement puts the pod in, or -1.
func (s *solver) domainAfter(p *plan, key int32) int32 {
	for i := range p.pinnedDomains.n {
		if pinned := p.pinnedDomains.at(i); pinned.key == key {
			return pinned.domain
		}
	}
	if d := p.target.domains[key]; d >= 0 {
		return d
	}
	if p.narrowed {
		if r, ok := p.reqs.Get(s.topo.Keys[key].Name); ok {
			if v, single := r.Single(); single {
				return s.topo.Keys[key].Index[v]
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
	type move struct {
		removal removal
		commit  commitment
	}
	var buf [4]move // a NodeClaim rarely drops a size only after more moves
	moves := buf[:0]
	for _, q := range candidates {
		if src.price < start-priceEpsilon || len(src.placed) <= 1 {
			break
		}
		r := s.remove(q, src)
		best, found := s.bestTarget(q, src, 2*priceEpsilon)
		if !found {
			s.undoRemove(&r)
			continue
		}
		moves = append(moves, move{r, s.commitUndoable(q, &best)})
	}
	if src.price < start-priceEpsilon {
		s.reindex(src)
		return true
	}
	for i := len(moves) - 1; i >= 0; i-- {
		s.undoCommit(&moves[i].commit)
		s.undoRemove(&moves[i].removal)
	}
	return false
}

// bestTarget finds where q (already removed from src) adds the least price, if that is below
// limit (binindex.go finds it). With a limit of 2·priceEpsilon, only room other nodes already pay
// for will do.
func (s *solver) bestTarget(q *podInfo, src *bin, limit float64) (plan, bool) {
	if limit <= 0 {
		return plan{}, false
	}
	if s.index == nil {
		return s.scanTarget(q, src, limit)
	}
	check := func(p plan) bool { return s.removalKeepsOthers(q, src, &p) }
	c := s.roomCandidates(q, src, limit, orderByDelta, check)
	if c.foundFree || limit <= 2*priceEpsilon {
		return c.free, c.foundFree
	}
	best, found := c.narrowed, c.foundNarrow
	if g, ok := s.growthCandidate(q, src, limit, orderByDelta, check); ok && (!found || orderByDelta.beats(&g, &best)) {
		best, found = g, true
	}
	return best, found
}

// commitment is what undoCommit needs to reverse a placement exactly.
type commitment struct {
	q      *podInfo
	b      *bin
	saved  bin
	limits limits
}

// commitUndoable commits a placement on a node that already has pods (or is an existing node);
// undoCommit reverses it exactly.
func (s *solver) commitUndoable(q *podInfo, p *plan) commitment {
	c := commitment{q: q, b: p.target, saved: *p.target}
	if c.b.tmpl != nil {
		c.limits = c.b.tmpl.limits
	}
	s.commit(q, p)
	return c
}

// undoCommit reverses the placement c recorded.
func (s *solver) undoCommit(c *commitment) {
	b, q := c.b, c.q
	for _, g := range q.selectedBy {
		s.uncount(b, g)
	}
	for _, o := range q.ownedGroups {
		s.uncountOwner(b, o.group)
	}
	counts, owners := b.counts, b.owners
	*b = c.saved
	b.counts, b.owners = counts, owners
	if b.tmpl != nil {
		b.tmpl.limits = c.limits
	}
	s.reindex(b)
}
