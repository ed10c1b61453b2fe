package scheduling

import (
	"math"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/topology"
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
			if found && !resources.FitsCore(&b.used, &q.requests, &b.opts.alloc[b.first]) {
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
		if free && b.isNew() && !resources.FitsCore(&b.used, &q.requests, &b.opts.alloc[b.first]) {
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
	if len(s.topo.Keys) > 0 {
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
	alloc := &b.capacity.Core
	if b.existing == nil {
		alloc = &b.opts.alloc[b.first]
	}
	e := indexedBin{b: b}
	for r := range resources.NumCore {
		e.room[r] = alloc[r] - b.used.Core[r]
	}
	e.slack = float64(e.room[resources.CPU])*s.cpuWeight + float64(e.room[resources.Memory])*s.memWeight
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
	e.cpu = int16(bucketOf(float64(ib.room[resources.CPU]) * s.cpuWeight))
	e.mem = int16(bucketOf(float64(ib.room[resources.Memory]) * s.memWeight))
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
	ruledOut := func(list []int32, onSkip func() []topology.GroupCount, g int32) bool {
		n := s.occupied.of(list, g)
		if indexed && topology.CountOf(onSkip(), g) > 0 {
			n--
		}
		return int(n) >= others
	}
	for _, g := range q.activeGroups {
		if grp := s.topo.Groups[g]; grp.Key == topology.HostnameKey && grp.Kind == topology.AntiAffinity &&
			ruledOut(s.occupied.selected, func() []topology.GroupCount { return skip.counts }, g) {
			return true
		}
	}
	for _, g := range q.selectedBy {
		if grp := s.topo.Groups[g]; grp.Key == topology.HostnameKey && grp.Kind == topology.AntiAffinity &&
			ruledOut(s.occupied.owners, func() []topology.GroupCount { return skip.owners }, g) {
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
