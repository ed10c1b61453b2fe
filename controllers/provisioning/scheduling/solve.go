package scheduling

import (
	"cmp"
	"context"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/topology"
)

// solver holds the state of one simulation.
type solver struct {
	opts          Options
	topo          *topology.Topology
	templates     []*template // one per NodePool, in weight order (template.index)
	fresh         []*bin      // per template: the NodeClaim a pod would open, reused between pods
	bins          []*bin      // existing nodes first, then planned NodeClaims in the order opened
	existingCount int         // how many of bins are existing nodes
	pods          []*podInfo
	failed        []*podInfo
	stopped       error
	claims        int
	existingNodes []*ExistingNode
	// set is where the existing nodes come from; full are the nodes of set left out because no
	// pod has room on them (selectExisting).
	set   *NodeSet
	full  []int32
	reach map[reachKey]bool
	// cpuWeight and memWeight make a millicore and a byte comparable: the inverse of the
	// allocatable of a reference instance type (the median-priced type of the first usable
	// NodePool), so that one such node counts 1 in each.
	cpuWeight, memWeight float64
	// pending is what the pods of the current pass not placed yet request (sizing.go).
	pending resources.Vec
	// index finds the bins worth trying for a pod, occupied counts the bins each hostname group
	// rules out (binindex.go).
	index    *binIndex
	occupied occupancy
}

// Solve places the pending pods of in on existing nodes and on new NodeClaims, packing them so
// that the new capacity is cheap, and explains every pod it could not place. It reads nothing but
// in and changes nothing in it.
//
// Results are always returned. When ctx ends first, the pods not yet placed are reported as
// unschedulable and the error is ctx.Err().
//
// It is Prepare and Scheduler.WithVolumes followed by Scheduler.Solve with each NodePool's
// Remaining; to run several simulations on unchanged NodePools, prepare once and call
// Scheduler.Solve.
func Solve(ctx context.Context, in Input) (*Results, error) {
	sch, err := Prepare(in.NodePools, in.DaemonSetPods, in.Options)
	if err != nil {
		return nil, err
	}
	sch = sch.WithVolumes(in.Volumes)
	remaining := make([]corev1.ResourceList, len(in.NodePools))
	for i, np := range in.NodePools {
		remaining[i] = np.Remaining
	}
	return sch.solve(ctx, in.Pods, NewNodeSet(in.ExistingNodes), nil, remaining)
}

// count records a pod selected by group g on bin b; countOwner a pod that declares g as a hard
// constraint; uncount and uncountOwner reverse them.
func (s *solver) count(b *bin, g int32)        { s.tally(b, g, false, 1) }
func (s *solver) countOwner(b *bin, g int32)   { s.tally(b, g, true, 1) }
func (s *solver) uncount(b *bin, g int32)      { s.tally(b, g, false, -1) }
func (s *solver) uncountOwner(b *bin, g int32) { s.tally(b, g, true, -1) }

// tally adds delta to the count of group g on bin b: of the pods g selects, or with owner set of
// the pods that declare g as a hard constraint. A hostname group counts on the bin (and in
// s.occupied, the bins it holds a pod on), any other group in the bin's domain when it has one.
func (s *solver) tally(b *bin, g int32, owner bool, delta int32) {
	grp := s.topo.Groups[g]
	onBin, inDomain, occupied := &b.counts, &grp.Counts, &s.occupied.selected
	if owner {
		onBin, inDomain, occupied = &b.owners, &grp.Owners, &s.occupied.owners
	} else {
		grp.Total += delta
	}
	if grp.Key == topology.HostnameKey {
		*onBin = topology.AddCount(*onBin, g, delta)
		if n := topology.CountOf(*onBin, g); (delta > 0 && n == delta) || (delta < 0 && n == 0) {
			s.occupied.note(g, occupied, delta)
		}
		return
	}
	if d := b.domains[grp.Key]; d >= 0 {
		grp.Grow(int(d) + 1)
		(*inDomain)[d] += delta
	}
}

// queueOrder sorts pods for packing: real pods before virtual pods (CapacityBuffers' units and
// expected pods), which take only the room the real pods leave; then pods that need a node of their own (hostname
// anti-affinity on themselves) first, since they fix how many nodes there must be; then larger
// pods first, by their dominant share of the reference shape (the larger of cpu and memory),
// then cpu, memory and input order.
func queueOrder(a, b *podInfo) int {
	if a.buffer != b.buffer {
		if b.buffer {
			return -1
		}
		return 1
	}
	if a.separate != b.separate {
		if a.separate {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(b.size, a.size); c != 0 {
		return c
	}
	if c := cmp.Compare(b.requests.Core[resources.CPU], a.requests.Core[resources.CPU]); c != 0 {
		return c
	}
	if c := cmp.Compare(b.requests.Core[resources.Memory], a.requests.Core[resources.Memory]); c != 0 {
		return c
	}
	return cmp.Compare(a.order, b.order)
}

// run places the pods. The first pass tries each pod as it is; later passes retry the pods that
// failed, dropping their soft constraints one at a time, until a pass places nothing.
func (s *solver) run(ctx context.Context) {
	var queue []*podInfo
	for _, p := range s.pods {
		if p.err == nil {
			queue = append(queue, p)
		}
	}
	slices.SortStableFunc(queue, queueOrder)
	for pass := 0; len(queue) > 0; pass++ {
		placed := false
		var failed []*podInfo
		s.startPending(queue)
		for i, p := range queue {
			if i%32 == 0 && ctx.Err() != nil {
				s.stopped = ctx.Err()
				s.failed = append(append(s.failed, failed...), queue[i:]...)
				return
			}
			ok := s.place(p)
			for !ok && pass > 0 && p.relax() {
				ok = s.place(p)
			}
			s.pending.Sub(&p.requests)
			if ok {
				placed = true
				continue
			}
			failed = append(failed, p)
		}
		queue = failed
		if !placed && pass > 0 {
			break
		}
	}
	s.failed = queue
	s.repack(ctx)
	s.improve(ctx)
}

// place puts the pod where it costs the least (plan.better), and reports whether it found a
// place.
func (s *solver) place(q *podInfo) bool {
	best, found := s.bestPlacement(q)
	if found {
		s.commit(q, &best)
	}
	return found
}

// bestPlacement returns the placement of q that costs the least (plan.better), and whether there
// is one: on the existing nodes and planned NodeClaims (binindex.go finds it), or a new NodeClaim
// from the first NodePool that can take the pod, whichever is better.
func (s *solver) bestPlacement(q *podInfo) (plan, bool) {
	var best plan
	var found bool
	if s.useIndex() {
		c := s.roomCandidates(q, nil, math.Inf(1), orderByUnit, nil)
		if c.foundFree {
			return c.free, true // nothing beats a placement that adds no price
		}
		best, found = c.narrowed, c.foundNarrow
		if g, ok := s.growthCandidate(q, nil, math.Inf(1), orderByUnit, nil); ok && (!found || orderByUnit.beats(&g, &best)) {
			best, found = g, true
		}
	} else {
		best, found = s.scanPlacement(q)
	}
	for _, fresh := range s.fresh {
		if fresh == nil || q.tolerance[fresh.tmpl.index] == 2 {
			continue
		}
		est, ok := s.estimate(q, fresh)
		if !ok {
			continue
		}
		p, ok := s.fit(q, fresh, nil)
		if !ok {
			continue // not compatible: the next NodePool may be
		}
		if !found || !est.cannotBeat(&best) {
			s.sizeOpening(q, &p)
			if !found || p.better(&best) {
				best, found = p, true
			}
		}
		break // only the first compatible NodePool opens NodeClaims for the pod
	}
	return best, found
}
