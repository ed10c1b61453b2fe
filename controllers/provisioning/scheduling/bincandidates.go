package scheduling

import "github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"

// The candidate searches of the bin index (binindex.go): the bins with room for a pod at their
// current size, and the planned NodeClaims that would grow to take it.

// candidateCheck is what the caller checks of a placement before it counts: nil accepts all.
type candidateCheck func(p plan) bool

// candidateOrder is how a search compares placements: plan.better while packing,
// plan.betterDelta in the improvement pass.
type candidateOrder uint8

const (
	orderByUnit candidateOrder = iota
	orderByDelta
)

func (o candidateOrder) less(p, q *plan) bool {
	if o == orderByDelta {
		return p.betterDelta(q)
	}
	return p.better(q)
}

// beats reports whether p comes before o, or as early and on a bin opened earlier, as a scan of
// every bin in order would have it.
func (o candidateOrder) beats(p, q *plan) bool {
	if o.less(p, q) {
		return true
	}
	return !o.less(q, p) && p.target.id < q.target.id
}

// excludes reports whether no placement whose unit price and added price are at least those of
// bound can come before best.
func (o candidateOrder) excludes(bound, best *plan) bool {
	if o == orderByDelta {
		return bound.delta > best.delta+priceEpsilon
	}
	return bound.cannotBeat(best)
}

// candidates is what a search found: the best placement adding no price, and the best of those
// on a NodeClaim with room for the pod that add price all the same (its requirements narrow).
type candidates struct {
	free, narrowed         plan
	foundFree, foundNarrow bool
}

// roomCandidates looks for placements of q on bins with room for it at their current size,
// skipping skip: the best that adds no price (rank, then slack), and when there is none, the best
// that does (the requirements q adds narrow the NodeClaim's options) if it adds less than limit.
func (s *solver) roomCandidates(q *podInfo, skip *bin, limit float64, order candidateOrder, check candidateCheck) candidates {
	var c candidates
	if s.excludedEverywhere(q, skip) {
		return c
	}
	qCPU, qMem := float64(q.requests.Core[resources.CPU])*s.cpuWeight, float64(q.requests.Core[resources.Memory])*s.memWeight
	startCPU, startMem := bucketOf(qCPU), bucketOf(qMem)
	var parts [8]*partition
	for rank := range s.index.parts {
		for _, part := range s.partitionsFor(q, rank, parts[:0]) {
			g := &part.room
			for ri := g.from(startCPU); ri < len(g.rows); ri++ {
				row := &g.rows[ri]
				floorCPU := bucketFloor(int(row.key))
				if c.foundFree && floorCPU+bucketFloor(startMem)-qCPU-qMem > c.free.slack+priceEpsilon {
					break // every later row leaves more slack
				}
				for ci := row.cols.from(startMem); ci < len(row.cols.cells); ci++ {
					cell := &row.cols.cells[ci]
					if c.foundFree && floorCPU+bucketFloor(int(cell.key))-qCPU-qMem > c.free.slack+priceEpsilon {
						break
					}
					// The cell's bins are in order of least slack (then id), the order they are
					// tried in: those with room that could beat the best placement known when the
					// cell is reached, until one cannot beat the best found since.
					startFound := c.foundFree
					var startSlack float64
					var startID int32
					if startFound {
						startSlack, startID = c.free.slack, c.free.target.id
					}
					for i := range cell.bins {
						ib := &cell.bins[i]
						slack := ib.slack - qCPU - qMem
						if startFound && cannotBeat(slack, ib.b, startSlack, startID) {
							if slack > startSlack+priceEpsilon {
								break // nor can any later bin of the cell
							}
							continue
						}
						if !resources.FitsCore(&resources.Vec{}, &q.requests, &ib.room) {
							continue
						}
						if c.foundFree && cannotBeatFree(slack, ib.b, &c.free) {
							break // nor can the rest of the cell
						}
						s.tryRoom(q, ib.b, skip, limit, order, check, &c)
					}
				}
			}
		}
		if c.foundFree {
			return c // a lower rank comes first
		}
	}
	return c
}

// cannotBeatFree reports whether placing the pod on b, leaving slack, cannot beat best, a
// placement that adds no price: a larger slack cannot, nor an equal one on a bin opened later.
func cannotBeatFree(slack float64, b *bin, best *plan) bool {
	return cannotBeat(slack, b, best.slack, best.target.id)
}

// cannotBeat is cannotBeatFree against a placement leaving bestSlack on the bin with id bestID.
func cannotBeat(slack float64, b *bin, bestSlack float64, bestID int32) bool {
	return slack > bestSlack+priceEpsilon || (slack >= bestSlack-priceEpsilon && b.id > bestID)
}

// tryRoom checks the placement of q on b, a bin with room for it at its current size, for
// roomCandidates.
func (s *solver) tryRoom(q *podInfo, b, skip *bin, limit float64, order candidateOrder, check candidateCheck, c *candidates) {
	if b == skip {
		return
	}
	alloc := &b.capacity.Core
	if b.existing == nil {
		alloc = &b.opts.alloc[b.first]
	}
	if !resources.FitsCore(&b.used, &q.requests, alloc) {
		return
	}
	est, ok := s.estimate(q, b)
	if !ok || (c.foundFree && !order.beats(&est, &c.free)) {
		return
	}
	p, ok := s.fit(q, b, nil)
	if !ok {
		return
	}
	if p.delta > priceEpsilon {
		if p.delta < limit && (!c.foundNarrow || order.beats(&p, &c.narrowed)) && (check == nil || check(p)) {
			c.narrowed, c.foundNarrow = p, true
		}
		return
	}
	if (c.foundFree && !order.beats(&p, &c.free)) || (check != nil && !check(p)) {
		return
	}
	c.free, c.foundFree = p, true
}

// growthCandidate returns the best placement of q (in the given order) on a planned NodeClaim
// without room for it at its current size, skipping skip and placements adding limit or more,
// and whether there is one. It scans the NodeClaims cheapest first and stops as described above.
func (s *solver) growthCandidate(q *podInfo, skip *bin, limit float64, order candidateOrder, check candidateCheck) (plan, bool) {
	var best plan
	found := false
	if limit <= s.index.minStep+priceEpsilon || s.excludedEverywhere(q, skip) {
		return best, false // every growth adds at least the smallest step
	}
	var buf [8]*partition
	parts := s.partitionsFor(q, 2, buf[:0])
	after := 0 // NodeClaims looked at since the first placement found
	var posBuf [8]int
	pos := posBuf[:0] // per partition, the next price bucket to look at
	for range parts {
		pos = append(pos, 0)
	}
	for {
		// The cheapest bucket any partition has left.
		k := -1
		for i, part := range parts {
			if pos[i] < len(part.price.cells) && (k < 0 || int(part.price.cells[pos[i]].key) < k) {
				k = int(part.price.cells[pos[i]].key)
			}
		}
		if k < 0 {
			break
		}
		for i, part := range parts {
			if pos[i] == len(part.price.cells) || int(part.price.cells[pos[i]].key) != k {
				continue
			}
			bins := part.price.cells[pos[i]].bins
			pos[i]++
			for j := range bins {
				if found {
					if after++; after > growthScanLimit {
						break
					}
				}
				b := bins[j].b
				if b == skip || resources.FitsCore(&resources.Vec{}, &q.requests, &bins[j].room) {
					continue // roomCandidates looks at these
				}
				step := b.opts.priceOf(b.first + 1)
				bound := plan{unit: max(step-b.budget, 0), delta: step - b.price}
				if bound.delta >= limit || (found && order.excludes(&bound, &best)) {
					continue
				}
				est, ok := s.estimate(q, b)
				if !ok || est.delta >= limit || (found && !order.beats(&est, &best)) {
					continue
				}
				p, ok := s.fit(q, b, nil)
				if !ok || p.delta >= limit || (found && !order.beats(&p, &best)) || (check != nil && !check(p)) {
					continue
				}
				best, found = p, true
			}
		}
		// No dearer NodeClaim adds less than the smallest step, or less per unit than nothing.
		if found && ((best.delta <= s.index.minStep+priceEpsilon && (best.unit <= priceEpsilon || order == orderByDelta)) || after >= growthScanLimit) {
			break
		}
	}
	return best, found
}
