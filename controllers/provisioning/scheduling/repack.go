package scheduling

import (
	"context"
	"fmt"
	"slices"
	"strings"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/pack"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/topology"
)

// The repacking pass runs once every pod has been tried, before the improvement pass. Greedy
// packing places pods one at a time in size order, so it cannot mix instance types the way the
// cheapest covering does (a cpu-rich type for cpu-heavy pods beside a memory-rich one for
// memory-heavy pods). Where pods only need resources, the pass packs them again from scratch
// (the pack package) and keeps the result when it is cheaper.
//
// It works on classes of planned NodeClaims: NodeClaims from the same NodePool with the same
// requirements (hence the same instance-type options and topology domains) and NodeClaim
// requirements, each holding movable pods only. A pod is movable when moving it between such
// NodeClaims changes nothing any constraint looks at: it binds no host port, its node
// requirements do not name a hostname, and neither its own topology constraints (hard or soft)
// nor those of any pod that selects it are per node (kubernetes.io/hostname). Its zone and its
// other domains stay the same, since every NodeClaim of its class has the same ones, so spreads
// and affinities over zones hold as they did. A new packing is kept only when it costs less,
// keeps within the NodePool's limits and meets its minValues (or relaxes them under
// MinValuesPolicy BestEffort).

// repack re-packs each class of planned NodeClaims, in the order their first NodeClaim was
// opened.
func (s *solver) repack(ctx context.Context) {
	type class struct {
		key  string
		bins []*bin
	}
	var classes []*class
	index := map[string]*class{}
	for _, b := range s.bins[s.existingCount:] {
		if len(b.placed) == 0 || !s.holdsMovablePods(b) {
			continue
		}
		// Equal requirements share one option set (template.optionsFor); the NodeClaim
		// requirements are compared by value.
		key := fmt.Sprintf("%d|%p|%s", b.tmpl.index, b.opts, b.spec)
		c := index[key]
		if c == nil {
			c = &class{key: key}
			index[key] = c
			classes = append(classes, c)
		}
		c.bins = append(c.bins, b)
	}
	for _, c := range classes {
		if ctx.Err() != nil {
			return
		}
		if len(c.bins) > 1 || len(c.bins[0].placed) > 1 {
			s.repackClass(c.bins)
		}
	}
}

// maxRepackShapes bounds the distinct requests of a class the packer takes on: choosing each
// pod costs time in proportion to them. Pods of a workload share their requests, so real classes
// have few.
const maxRepackShapes = 256

// holdsMovablePods reports whether every pod planned on b is movable.
func (s *solver) holdsMovablePods(b *bin) bool {
	for _, q := range b.placed {
		if !s.movable(q) {
			return false
		}
	}
	return true
}

// movable reports whether q may move between NodeClaims with the same requirements without any
// constraint noticing (see above).
func (s *solver) movable(q *podInfo) bool {
	if len(q.ports) > 0 || q.separate {
		return false
	}
	for _, term := range q.active {
		if term.Has(karpv1.LabelHostname) {
			return false // the NodeClaims of a class have different hostnames
		}
	}
	perNode := func(g int32) bool { return s.topo.Groups[g].Key == topology.HostnameKey }
	for _, o := range q.ownedGroups {
		if perNode(o.group) {
			return false
		}
	}
	for _, pr := range q.prefs {
		if (pr.kind == prefAntiAffinity || pr.kind == prefAffinity || pr.kind == prefSpread) && perNode(pr.group) {
			return false
		}
	}
	return !slices.ContainsFunc(q.selectedBy, perNode)
}

// repackClass packs the pods of bins (one class) from scratch and, when that is cheaper and
// allowed, puts them where the packing says: on bins in order, opening more NodeClaims or
// leaving some of bins empty as needed.
func (s *solver) repackClass(bins []*bin) {
	t, opts := bins[0].tmpl, bins[0].opts
	shapes, members := shapesOf(bins)
	if len(shapes) > maxRepackShapes {
		return
	}
	popts := make([]pack.Option, len(opts.typeIndices))
	for i, ti := range opts.typeIndices {
		popts[i] = pack.Option{Alloc: resources.Vec{Core: opts.alloc[i], Extended: t.instanceTypes[ti].alloc.Extended}, Price: opts.price[i]}
	}
	old := 0.0
	for _, b := range bins {
		old += b.price
	}
	nodes, cost := pack.Pack(popts, t.daemon, shapes, [resources.NumCore]float64{resources.CPU: s.cpuWeight, resources.Memory: s.memWeight})
	if cost < 0 || cost >= old-priceEpsilon {
		return
	}

	// Limits: swap the reservations of bins for those of the new nodes.
	reserved, claims := t.limits.reserved, t.limits.claims
	if t.limits.any() {
		for _, b := range bins {
			reserved = reserved.Minus(t.instanceTypes[opts.typeIndices[b.first]].capacity)
		}
		for _, n := range nodes {
			reserved = reserved.Plus(t.instanceTypes[opts.typeIndices[n.Option]].capacity)
		}
		claims += int64(len(nodes) - len(bins))
		if !t.limits.holds(&reserved, claims) {
			return
		}
	}
	// minValues: every new node must leave enough distinct values, as fit demands of a placement.
	relaxed := make([]bool, len(nodes))
	if t.minValues {
		for i := range nodes {
			if err := t.fittingTypes(opts, nodes[i].Option, &nodes[i].Used).SatisfiesMinValues(bins[0].reqs); err != nil {
				if s.opts.MinValuesPolicy != MinValuesPolicyBestEffort {
					return
				}
				relaxed[i] = true
			}
		}
	}

	model := *bins[0]
	next := make([]int, len(shapes)) // pods of each shape handed out so far
	for i, n := range nodes {
		var b *bin
		if i < len(bins) {
			b = bins[i]
		} else {
			b = s.openClaim(t)
			b.reqs, b.spec, b.domains, b.opts, b.taints = model.reqs, model.spec, model.domains, model.opts, model.taints
		}
		b.placed = b.placed[:0]
		for _, sc := range n.Counts {
			b.placed = append(b.placed, members[sc.Shape][next[sc.Shape]:next[sc.Shape]+sc.Count]...)
			next[sc.Shape] += sc.Count
		}
		b.used, b.first, b.ports = n.Used, n.Option, nil
		b.price = opts.price[n.Option]
		b.budget = b.price
		b.minRelaxed = relaxed[i]
		s.reindex(b)
	}
	for _, b := range bins[min(len(nodes), len(bins)):] {
		b.placed, b.used, b.ports, b.price, b.budget, b.minRelaxed = nil, t.daemon, nil, 0, 0, false
		s.reindex(b)
	}
	t.limits.reserved, t.limits.claims = reserved, claims
}

// shapesOf groups the pods planned on bins by request: one shape per distinct request, in the
// order of first appearance, with its pods in order.
func shapesOf(bins []*bin) ([]pack.Shape, [][]*podInfo) {
	type shapeKey struct {
		core     [resources.NumCore]int64
		extended string
	}
	var shapes []pack.Shape
	var members [][]*podInfo
	index := map[shapeKey]int{}
	for _, b := range bins {
		for _, q := range b.placed {
			key := shapeKey{core: q.requests.Core}
			if len(q.requests.Extended) > 0 {
				parts := make([]string, 0, len(q.requests.Extended))
				for name, n := range q.requests.Extended {
					parts = append(parts, fmt.Sprintf("%s=%d", name, n))
				}
				slices.Sort(parts)
				key.extended = strings.Join(parts, "|")
			}
			i, ok := index[key]
			if !ok {
				i = len(shapes)
				index[key] = i
				shapes = append(shapes, pack.Shape{Req: q.requests})
				members = append(members, nil)
			}
			shapes[i].Count++
			members[i] = append(members[i], q)
		}
	}
	return shapes, members
}

// holds reports whether reserving reserved in claims NodeClaims keeps within the limits.
func (l *limits) holds(reserved *resources.Vec, claims int64) bool {
	if l.nodes >= 0 && claims > l.nodes {
		return false
	}
	for i := range l.limited {
		if l.limited[i] && reserved.Core[i] > l.remaining.Core[i] {
			return false
		}
	}
	for name := range l.limitedExtended {
		if reserved.Extended[name] > l.remaining.Extended[name] {
			return false
		}
	}
	return true
}
