package scheduling

import (
	"cmp"
	"math"
	"slices"
)

// The bin index lets place and the improvement pass look at a few bins instead of every one, so
// that a simulation takes time about linear in the number of pods.
//
// Bins with pods are kept in partitions, one per rank (initialized existing nodes, other existing
// nodes, planned NodeClaims) and domain of the primary topology key (the first one the pods use,
// usually the zone; bins whose domain is still open have a partition of their own). A search only
// looks at the partitions of the domains the pod's topology allows there (domainRefusal).
//
// In a partition, a room grid holds the bins by the room they have at their current size (the
// allocatable of a planned NodeClaim's cheapest fitting option, or an existing node's, less what
// they hold), cpu and memory each on a logarithmic scale. A pod fits a bin at its current size only
// where both rooms are at least its requests, and the slack it leaves there is the sum of the two
// rooms (in units of the reference shape, as slackOf counts) less its own size: so roomCandidates
// visits only the cells that can hold the pod, in order of their least slack, and stops where that
// exceeds the best placement found. It finds what a scan of every bin finds.
//
// Planned NodeClaims are also kept in buckets by price. growthCandidate, which looks for the best
// placement on a NodeClaim that must grow to take the pod, scans them cheapest bucket first: among
// placements adding as much, the cheaper NodeClaim wins, so once a placement costs nothing against
// the budgets and adds no more than the smallest step between two options of any NodeClaim, no
// NodeClaim of a dearer bucket can beat it and the scan stops at the end of the bucket. The scan
// also stops growthScanLimit NodeClaims after the first placement it finds, a bound that keeps it
// short when thousands of NodeClaims could take the pod, at the risk of missing one that would
// grow by less or, among equals, a cheaper one of the same bucket; with fewer NodeClaims than
// that, it finds what a scan of every NodeClaim finds.
//
// occupancy counts, per hostname group, the bins it rules out, so that a pod whose hostname
// anti-affinity rules out every bin (each pod that needs a node of its own, of which there may be
// thousands) is known to fit none without a search.
//
// Within a cell or price bucket, ties go to the bin opened first (the lower id), as a scan of
// every bin in order would have it.

const (
	indexBuckets   = 256 // per dimension of a room grid, and of prices
	indexPerOctave = 8
	// growthScanLimit is how many more NodeClaims growthCandidate looks at once it has a
	// placement that may not be the best.
	growthScanLimit = 64
)

// buckets holds bins in buckets, keeping only those that have had bins, in bucket order.
type buckets struct {
	cells []bucket
}

// bucket is the bins of one bucket: in a room grid's cell in order of least slack, then lowest
// bin id (addInOrder); in price buckets in no particular order.
type bucket struct {
	key  int16
	bins []indexedBin
}

// indexedBin is a bin in a bucket with its room at its current size, so that a search can rule it
// out without reading the bin.
type indexedBin struct {
	b    *bin
	room [numCore]int64
	// slack is the room weighted as slackOf weighs it.
	slack float64
}

// from returns the position of the first bucket kept whose key is at least k.
func (bs *buckets) from(k int) int {
	lo, hi := 0, len(bs.cells)
	for lo < hi {
		mid := (lo + hi) / 2
		if int(bs.cells[mid].key) < k {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// add puts b in bucket k, at the end, and returns its position there.
func (bs *buckets) add(b indexedBin, k int) int32 {
	i := bs.from(k)
	if i == len(bs.cells) || int(bs.cells[i].key) != k {
		bs.cells = slices.Insert(bs.cells, i, bucket{key: int16(k)})
	}
	bs.cells[i].bins = append(bs.cells[i].bins, b)
	return int32(len(bs.cells[i].bins) - 1)
}

// remove takes the bin at position pos out of bucket k, moving the last bin of the bucket into
// its place, and returns the moved bin (nil when none moved).
func (bs *buckets) remove(k int, pos int32) *bin {
	i := bs.from(k)
	list := bs.cells[i].bins
	last := list[len(list)-1]
	list[pos] = last
	list[len(list)-1] = indexedBin{}
	bs.cells[i].bins = list[:len(list)-1] // an emptied bucket stays, ready for the next bin
	if int(pos) == len(list)-1 {
		return nil
	}
	return last.b
}

// octaveSteps are the bucket boundaries within a factor of two: 2^(i/indexPerOctave).
func octaveSteps() [indexPerOctave]float64 {
	return [indexPerOctave]float64{1, 1.0905077326652577, 1.189207115002721, 1.2968395546510096,
		1.4142135623730951, 1.5422108254079407, 1.681792830507429, 1.8340080864093424}
}

// bucketOf maps an amount to its bucket: 0 for nothing (or less), then indexPerOctave buckets per
// factor of two (bucket indexBuckets/2 starts at 1); it never decreases as v grows. It takes no
// logarithm, since every change to a bin calls it.
func bucketOf(v float64) int {
	if v <= 0 {
		return 0
	}
	m, e := math.Frexp(v) // v = m·2^e, m in [0.5, 1)
	m, e = 2*m, e-1
	steps := octaveSteps()
	sub := 0
	for sub+1 < indexPerOctave && m >= steps[sub+1] {
		sub++
	}
	k := e*indexPerOctave + sub + indexBuckets/2
	return min(max(k, 1), indexBuckets-1)
}

// bucketFloor is the least amount bucket k holds (-Inf for bucket 0, which holds what is not
// positive).
func bucketFloor(k int) float64 {
	if k <= 0 {
		return math.Inf(-1)
	}
	return bucketFloors[min(k, indexBuckets-1)]
}

// bucketFloors holds bucketFloor of every bucket, read in the inner loops of roomCandidates.
var bucketFloors = func() (out [indexBuckets]float64) {
	steps := octaveSteps()
	for k := 1; k < indexBuckets; k++ {
		if k == 1 {
			continue // 0: it also holds everything smaller
		}
		d := k - indexBuckets/2
		q, r := d/indexPerOctave, d%indexPerOctave
		if r < 0 {
			q, r = q-1, r+indexPerOctave
		}
		out[k] = math.Ldexp(steps[r], q)
	}
	return out
}()

// roomGrid holds bins by cpu room (rows) and memory room (the buckets of a row), keeping only the
// rows that have had bins, in row order.
type roomGrid struct {
	rows []gridRow
}

type gridRow struct {
	key  int16
	cols buckets
}

// from returns the position of the first row kept whose key is at least k.
func (g *roomGrid) from(k int) int {
	lo, hi := 0, len(g.rows)
	for lo < hi {
		mid := (lo + hi) / 2
		if int(g.rows[mid].key) < k {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// add puts b in cell (row, col), in order, and reports through at the new position of every bin
// that moved (b included).
func (g *roomGrid) add(b indexedBin, row, col int, at func(*bin, int32)) {
	i := g.from(row)
	if i == len(g.rows) || int(g.rows[i].key) != row {
		g.rows = slices.Insert(g.rows, i, gridRow{key: int16(row)})
	}
	g.rows[i].cols.addInOrder(b, col, at)
}

// remove takes the bin at position pos out of cell (row, col), keeping the order, and reports
// through at the new position of every bin that moved.
func (g *roomGrid) remove(row, col int, pos int32, at func(*bin, int32)) {
	g.rows[g.from(row)].cols.removeInOrder(col, pos, at)
}

// addInOrder puts b in bucket k keeping the bucket in order of least slack, then lowest bin id
// (the order roomCandidates tries bins in), and reports through at the new position of every bin
// that moved (b included).
func (bs *buckets) addInOrder(b indexedBin, k int, at func(*bin, int32)) {
	i := bs.from(k)
	if i == len(bs.cells) || int(bs.cells[i].key) != k {
		bs.cells = slices.Insert(bs.cells, i, bucket{key: int16(k)})
	}
	list := bs.cells[i].bins
	pos, _ := slices.BinarySearchFunc(list, b, func(e, t indexedBin) int {
		return cmp.Or(cmp.Compare(e.slack, t.slack), cmp.Compare(e.b.id, t.b.id))
	})
	list = slices.Insert(list, pos, b)
	bs.cells[i].bins = list
	for j := pos; j < len(list); j++ {
		at(list[j].b, int32(j))
	}
}

// removeInOrder takes the bin at position pos out of bucket k, keeping the order, and reports
// through at the new position of every bin that moved.
func (bs *buckets) removeInOrder(k int, pos int32, at func(*bin, int32)) {
	i := bs.from(k)
	list := slices.Delete(bs.cells[i].bins, int(pos), int(pos)+1) // an emptied bucket stays
	bs.cells[i].bins = list
	for j := int(pos); j < len(list); j++ {
		at(list[j].b, int32(j))
	}
}

// partition is the bins of one rank and one domain of the primary topology key.
type partition struct {
	room  roomGrid
	price buckets // planned NodeClaims only
}

// indexEntry is where a bin is in the index.
type indexEntry struct {
	indexed, priced   bool // in a room grid; also by price
	rank              int8 // its partition: rank and domain of the primary key
	domain            int32
	cpu, mem, price   int16 // buckets
	roomPos, pricePos int32
}

// binIndex is the index of one simulation.
type binIndex struct {
	key     int32           // the primary topology key, -1 when the pods use none
	parts   [3][]*partition // by rank, then domain+1 (0 for an open domain)
	entries []indexEntry    // by bin id
	size    int             // bins indexed
	// minStep is the smallest difference between the prices of two consecutive options of any
	// option set a planned NodeClaim has had; steps remembers the sets seen.
	minStep float64
	steps   map[*optionSet]bool
}

// occupancy counts, per hostname group, the bins holding a pod it selects and the bins holding a
// pod that declares it as a hard constraint.
type occupancy struct {
	selected, owners []int32 // by group
}

// note adds delta to counter g of list.
func (o *occupancy) note(g int32, list *[]int32, delta int32) {
	for int(g) >= len(*list) {
		*list = append(*list, 0)
	}
	(*list)[g] += delta
}

func (o *occupancy) of(list []int32, g int32) int32 {
	if int(g) < len(list) {
		return list[g]
	}
	return 0
}

// indexFrom is how many bins a simulation has before it indexes them: below it, trying every
// bin is cheaper than keeping the index, and finds the same placements (growthScanLimit is
// larger, so the index is exact there too).
const indexFrom = 32

// useIndex reports whether searches use the bin index, building it once there are indexFrom
// bins.
func (s *solver) useIndex() bool {
	if s.index == nil && len(s.bins) >= indexFrom {
		s.buildIndex()
	}
	return s.index != nil
}

// scanPlacement is bestPlacement's search of the existing nodes and planned NodeClaims without
// the index: every bin in order, skipping those that even a lower bound shows cannot win.
func (s *solver) scanPlacement(q *podInfo) (plan, bool) {
	var best plan
	found := false
	for _, b := range s.bins {
		if b.isNew() {
			if len(b.placed) == 0 {
				continue
			}
			// A NodeClaim the pod does not fit at its current size must grow at least to its next
			// option.
			if found && !fitsCore(&b.used, &q.requests, &b.opts.alloc[b.first]) {
				next := b.opts.priceOf(b.first + 1)
				if bound := (plan{unit: max(next-b.budget, 0), delta: next - b.price}); bound.cannotBeat(&best) {
					continue
				}
			}
		}
		est, ok := s.estimate(q, b)
		if !ok || (found && !est.better(&best)) {
			continue
		}
		if p, ok := s.fit(q, b, nil); ok && (!found || p.better(&best)) {
			best, found = p, true
		}
	}
	return best, found
}

// scanTarget is bestTarget without the index: every bin in order.
func (s *solver) scanTarget(q *podInfo, src *bin, limit float64) (plan, bool) {
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
		if !ok || est.delta >= limit || (found && !est.betterDelta(&best)) {
			continue
		}
		p, ok := s.fit(q, b, nil)
		if !ok || p.delta >= limit || (found && !p.betterDelta(&best)) || !s.removalKeepsOthers(q, src, &p) {
			continue
		}
		best, found = p, true
	}
	return best, found
}

// buildIndex indexes every bin; the primary topology key is the first one the pods use.
func (s *solver) buildIndex() {
	s.index = &binIndex{key: -1, minStep: math.Inf(1), steps: map[*optionSet]bool{}}
	if len(s.topo.keys) > 0 {
		s.index.key = 0
	}
	for _, b := range s.bins {
		s.reindex(b)
	}
}

// setRoomPos records that b is at position pos of its room cell.
func (x *binIndex) setRoomPos(b *bin, pos int32) { x.entries[b.id].roomPos = pos }

func (x *binIndex) entry(b *bin) *indexEntry {
	for int(b.id) >= len(x.entries) {
		x.entries = append(x.entries, indexEntry{})
	}
	return &x.entries[b.id]
}

func (x *binIndex) partition(rank int, domain int32) *partition {
	list := x.parts[rank]
	for int(domain)+1 >= len(list) {
		list = append(list, nil)
	}
	x.parts[rank] = list
	if list[domain+1] == nil {
		list[domain+1] = &partition{}
	}
	return list[domain+1]
}

// indexed returns b with its room at its current size (allocatable of its cheapest fitting
// option, or an existing node's, less what it holds).
func (s *solver) indexed(b *bin) indexedBin {
	alloc := &b.capacity.core
	if b.existing == nil {
		alloc = &b.opts.alloc[b.first]
	}
	e := indexedBin{b: b}
	for r := range numCore {
		e.room[r] = alloc[r] - b.used.core[r]
	}
	e.slack = float64(e.room[resCPU])*s.cpuWeight + float64(e.room[resMemory])*s.memWeight
	return e
}

// reindex puts b where it now belongs in the index: call it after anything changes b's pods,
// size, price or domains.
func (s *solver) reindex(b *bin) {
	x := s.index
	if x == nil || b.id < 0 {
		return
	}
	e := x.entry(b)
	if e.indexed {
		p := x.parts[e.rank][e.domain+1]
		p.room.remove(int(e.cpu), int(e.mem), e.roomPos, x.setRoomPos)
		if e.priced {
			if moved := p.price.remove(int(e.price), e.pricePos); moved != nil {
				x.entries[moved.id].pricePos = e.pricePos
			}
		}
		e.indexed, e.priced = false, false
		x.size--
	}
	if b.isNew() && len(b.placed) == 0 {
		return
	}
	e.rank, e.domain = int8(b.rank()), -1
	if x.key >= 0 {
		e.domain = b.domains[x.key]
	}
	p := x.partition(int(e.rank), e.domain)
	ib := s.indexed(b)
	e.cpu = int16(bucketOf(float64(ib.room[resCPU]) * s.cpuWeight))
	e.mem = int16(bucketOf(float64(ib.room[resMemory]) * s.memWeight))
	p.room.add(ib, int(e.cpu), int(e.mem), x.setRoomPos)
	e.indexed = true
	x.size++
	if !b.isNew() {
		return
	}
	e.price, e.priced = int16(bucketOf(b.price)), true
	e.pricePos = p.price.add(ib, int(e.price))
	if !x.steps[b.opts] {
		x.steps[b.opts] = true
		for i := 1; i < len(b.opts.price); i++ {
			if d := b.opts.price[i] - b.opts.price[i-1]; d > priceEpsilon {
				x.minStep = min(x.minStep, d)
			}
		}
	}
}

// excludedEverywhere reports whether q's required hostname anti-affinity, or that of pods placed
// already, rules out every indexed bin but skip.
func (s *solver) excludedEverywhere(q *podInfo, skip *bin) bool {
	others := s.index.size
	indexed := skip != nil && skip.id >= 0 && int(skip.id) < len(s.index.entries) && s.index.entries[skip.id].indexed
	if indexed {
		others--
	}
	if others <= 0 {
		return true
	}
	ruledOut := func(list []int32, onSkip func() []groupCount, g int32) bool {
		n := s.occupied.of(list, g)
		if indexed && countOf(onSkip(), g) > 0 {
			n--
		}
		return int(n) >= others
	}
	for _, g := range q.activeGroups {
		if grp := s.topo.groups[g]; grp.key == hostnameKey && grp.kind == kindAntiAffinity &&
			ruledOut(s.occupied.selected, func() []groupCount { return skip.counts }, g) {
			return true
		}
	}
	for _, g := range q.selectedBy {
		if grp := s.topo.groups[g]; grp.key == hostnameKey && grp.kind == kindAntiAffinity &&
			ruledOut(s.occupied.owners, func() []groupCount { return skip.owners }, g) {
			return true
		}
	}
	return false
}

// partitionsFor returns, for rank, the partitions whose domain of the primary key q's topology
// allows (domainRefusal), the open one included.
func (s *solver) partitionsFor(q *podInfo, rank int, out []*partition) []*partition {
	out = out[:0]
	list := s.index.parts[rank]
	if len(list) == 0 {
		return out
	}
	k := s.index.key
	constrained := false
	for _, qk := range q.keys {
		constrained = constrained || qk == k
	}
	for i, p := range list {
		if p == nil || len(p.room.rows) == 0 {
			continue
		}
		if d := int32(i - 1); constrained && d >= 0 && s.domainRefusal(q, k, d) >= 0 {
			continue
		}
		out = append(out, p)
	}
	return out
}

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
	qCPU, qMem := float64(q.requests.core[resCPU])*s.cpuWeight, float64(q.requests.core[resMemory])*s.memWeight
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
						if !fitsCore(&vec{}, &q.requests, &ib.room) {
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
	alloc := &b.capacity.core
	if b.existing == nil {
		alloc = &b.opts.alloc[b.first]
	}
	if !fitsCore(&b.used, &q.requests, alloc) {
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
				if b == skip || fitsCore(&vec{}, &q.requests, &bins[j].room) {
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
