package scheduling

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/coverlp"
)

// The packer: pods that only need resources, packed from scratch onto nodes of one option set
// (repack.go decides which pods those are). It is a pure function of its inputs.
//
// It opens one node at a time until every pod has one:
//
//   - The node's option is chosen by the value of the pending demand it can hold at the dual
//     prices of the covering LP (coverlp) of the pending demand over the options: the LP's
//     optimum mixes the types that cover the demand at least price per unit, and its dual prices
//     say what a millicore, a byte or a GPU is worth in that optimum. An option's efficiency is the
//     value of the demand its room can take (each resource capped at what is pending, and counted
//     in whole copies of the largest pending pod) over its price: 1 for the types of the LP's
//     optimum while much is pending, less for the others and for types larger than what is left.
//     The most efficient option wins; among equals, the one the LP uses most, weighed by how much
//     it is shaped like the pod that opens the node.
//   - The node is filled, starting with the largest pending pod, by the pending pod a fill rule
//     scores best against the room left, until no pending pod fits. The rules measure each
//     resource as a share of the node and aim at a node whose resources run out together: a
//     cpu-rich type then takes cpu-heavy pods and a memory-rich one memory-heavy pods, which is
//     how the LP's mix of types gets used in full.
//   - The node then takes the cheapest option that fits what it holds.
//
// No one fill rule is best on every workload (taking the largest pods first fills nodes well when
// shapes vary a lot, keeping nodes balanced does better when a few shapes each suit one type), so
// pack runs each fillRule and keeps the cheapest packing. Pods with extended resources (GPUs) come
// first, so that the nodes they open take them with the pods that fill the rest.

// fillRule scores a pending pod for the node being filled; the best score wins.
type fillRule uint8

const (
	// fillAligned scores the dot product of the pod's request and the room left, over every
	// resource: the largest pod pointing the way of the room, as first-fit decreasing with an eye
	// on shape.
	fillAligned fillRule = iota
	// fillBalanced scores the cosine of the angle between request and room times the square root
	// of the request's size, over the scarce resources (those with a dual price): shape first,
	// then size.
	fillBalanced
	// fillEven scores how evenly the room of the scarce resources is left (the smallest spread
	// between their shares left), larger pods first among equals.
	fillEven
	numFillRules
)

// packOption is an option the packer may give a node: its allocatable and price.
type packOption struct {
	alloc vec
	price float64
}

// packShape is a request shared by count pods.
type packShape struct {
	req   vec
	count int
}

// packedNode is a node of a packing: the cheapest option that fits what it holds, what it holds
// (base included), and how many pods of each shape.
type packedNode struct {
	option int
	used   vec
	counts []shapeCount
}

// shapeCount is how many pods of one shape a packed node holds.
type shapeCount struct {
	shape, count int
}

// packer holds the state of one packing.
type packer struct {
	rule   fillRule
	opts   []packOption // cheapest first
	base   vec
	shapes []packShape
	order  []int // shapes in the order their pods open nodes
	left   []int // pods of each shape not packed yet
	demand vec   // what those pods request
	// coreDims and extDims are the LP's resources: the core ones with demand, then the extended
	// ones; cols and prices its columns, what each option offers of them beyond the base.
	coreDims []int
	extDims  []corev1.ResourceName
	cols     [][]float64
	prices   []float64
	lpOption []int                // the option of each LP column
	rooms    [][]float64          // what each option offers of the LP's resources
	lpCache  map[string]lpColumns // by resources, shared by the packings of one pack call
	// scarce are the LP resources with a dual price (those the LP's optimum uses up), by index.
	scarce  []int
	weights [numCore]float64 // to compare cpu and memory: see solver.cpuWeight
}

// pack packs the pods of shapes onto nodes of opts (cheapest first), each node starting from
// base (the DaemonSets); weights make cpu and memory comparable for the pod order. It returns the
// nodes of the cheapest packing the fill rules give and their total price, or a price of -1 when
// some pod fits no option.
func pack(opts []packOption, base vec, shapes []packShape, weights [numCore]float64) ([]packedNode, float64) {
	var best []packedNode
	bestPrice := -1.0
	cache := map[string]lpColumns{}
	for rule := range numFillRules {
		nodes, price := packWith(rule, opts, base, shapes, weights, cache)
		if price < 0 {
			return nil, -1
		}
		if bestPrice < 0 || price < bestPrice-priceEpsilon {
			best, bestPrice = nodes, price
		}
	}
	return best, bestPrice
}

// packWith packs with one fill rule; cache holds the LP columns by resources.
func packWith(rule fillRule, opts []packOption, base vec, shapes []packShape, weights [numCore]float64, cache map[string]lpColumns) ([]packedNode, float64) {
	p := &packer{rule: rule, opts: opts, base: base, shapes: shapes, left: make([]int, len(shapes)), weights: weights, lpCache: cache}
	for i, sh := range shapes {
		p.left[i] = sh.count
		for range sh.count {
			p.demand.addInPlace(&sh.req)
		}
		p.order = append(p.order, i)
	}
	slices.SortStableFunc(p.order, func(a, b int) int {
		ea, eb := len(shapes[a].req.extended) > 0, len(shapes[b].req.extended) > 0
		if ea != eb {
			if ea {
				return -1
			}
			return 1
		}
		return cmp.Compare(p.size(&shapes[b].req), p.size(&shapes[a].req))
	})
	var nodes []packedNode
	total := 0.0
	for next := 0; ; {
		for next < len(p.order) && p.left[p.order[next]] == 0 {
			next++
		}
		if next == len(p.order) {
			return nodes, total
		}
		first := p.order[next]
		o := p.chooseOption(first)
		if o < 0 {
			return nil, -1 // a pod fits no option: the caller's input is wrong
		}
		n := p.fill(o, first)
		total += p.opts[n.option].price
		nodes = append(nodes, n)
	}
}

// size is the dominant share of a request.
func (p *packer) size(r *vec) float64 {
	return max(float64(r.core[resCPU])*p.weights[resCPU], float64(r.core[resMemory])*p.weights[resMemory])
}

// fits reports whether add joins used on option o.
func (p *packer) fits(o int, used, add *vec) bool {
	if used.extended == nil && add.extended == nil {
		return fitsCore(used, add, &p.opts[o].alloc.core)
	}
	return fitsSum(used, add, &p.opts[o].alloc)
}

// pendingShapes reports how many shapes still have pods.
func (p *packer) pendingShapes() int {
	n := 0
	for _, l := range p.left {
		if l > 0 {
			n++
		}
	}
	return n
}

// chooseOption returns the option of the next node, which must take a pod of shape first, or -1
// when none can.
func (p *packer) chooseOption(first int) int {
	p.prepareLP()
	dims := len(p.coreDims) + len(p.extDims)
	demand := make([]float64, 0, dims)
	for _, r := range p.coreDims {
		demand = append(demand, float64(p.demand.core[r]))
	}
	for _, name := range p.extDims {
		demand = append(demand, float64(p.demand.extended[name]))
	}
	lp := coverlp.Solve(p.cols, p.prices, demand)
	counts := make([]float64, len(p.opts)) // how many of each option the LP's optimum takes
	for j, n := range lp.Counts {
		counts[p.lpOption[j]] = n
	}
	room := make([]float64, dims)
	needs := needsOf(&p.base, &p.shapes[first].req)
	var need [8]int64 // what q requests of each LP resource
	for d := range min(dims, len(need)) {
		need[d] = p.dimOf(&p.shapes[first].req, d)
	}

	p.scarce = p.scarce[:0]
	for d, y := range lp.Prices {
		if y > 0 {
			p.scarce = append(p.scarce, d)
		}
	}
	q := &p.shapes[first].req
	identical := p.pendingShapes() == 1
	best, bestEff, bestFit := -1, 0.0, 0.0
	// Only the LP's columns need a look: an option another no dearer one matches in every
	// resource the pods ask for is never more efficient, nor used by the LP.
	for _, i := range p.lpOption {
		if !fitsCore(&p.base, q, &p.opts[i].alloc.core) || (!needs.none() && !needs.fitIn(&p.opts[i].alloc)) {
			continue
		}
		copy(room, p.rooms[i])
		// Whole copies of q per resource; when every pending pod is like q, only as many as fit
		// in every resource at once.
		copies := int64(-1)
		for d := range room {
			n := needOf(&need, q, p, d)
			if n <= 0 {
				continue
			}
			k := int64(room[d]) / n
			room[d] = float64(k * n)
			if copies < 0 || k < copies {
				copies = k
			}
		}
		value := 0.0
		for d := range room {
			held := min(room[d], demand[d])
			if n := needOf(&need, q, p, d); identical && n > 0 {
				held = min(held, float64(copies*n))
			}
			if lp.Prices != nil {
				value += lp.Prices[d] * held
			}
		}
		eff := value / max(p.opts[i].price, 1e-12)
		if best >= 0 && eff < bestEff*(1-1e-6) {
			continue
		}
		// Of equally efficient options, the one the LP uses most, weighed by how much it is
		// shaped like the pod it opens with: each type of the LP's mix gets its share of nodes,
		// and the pods of each shape the type meant for them.
		fit := p.cosine(q, room, demand) * counts[i]
		if best >= 0 && eff <= bestEff*(1+1e-6) && fit <= bestFit+1e-9 {
			continue
		}
		best, bestEff, bestFit = i, eff, fit
	}
	return best
}

// needOf is what q requests of LP resource d, from need when it has room for d.
func needOf(need *[8]int64, q *vec, p *packer, d int) int64 {
	if d < len(need) {
		return need[d]
	}
	return p.dimOf(q, d)
}

// cosine is the cosine of the angle between request r and room, both measured as shares of the
// pending demand.
func (p *packer) cosine(r *vec, room, demand []float64) float64 {
	var dot, rr, oo float64
	for d := range room {
		a, b := float64(p.dimOf(r, d))/demand[d], room[d]/demand[d]
		dot, rr, oo = dot+a*b, rr+a*a, oo+b*b
	}
	if rr == 0 || oo == 0 {
		return 0
	}
	return dot / math.Sqrt(rr*oo)
}

// prepareLP sets the LP's resources to those with pending demand, and its columns when those
// changed, taking them from the cache the packings of one pack call share.
func (p *packer) prepareLP() {
	core := make([]int, 0, numCore)
	for r := range numCore {
		if p.demand.core[r] > 0 {
			core = append(core, r)
		}
	}
	var ext []corev1.ResourceName
	for name, n := range p.demand.extended {
		if n > 0 {
			ext = append(ext, name)
		}
	}
	slices.Sort(ext)
	if p.cols != nil && slices.Equal(core, p.coreDims) && slices.Equal(ext, p.extDims) {
		return
	}
	p.coreDims, p.extDims = core, ext
	key := fmt.Sprint(core, ext)
	if c, ok := p.lpCache[key]; ok {
		p.cols, p.prices, p.lpOption, p.rooms = c.cols, c.prices, c.option, c.rooms
		return
	}
	// An option that a no dearer one matches in every resource is never needed: leaving it out
	// keeps the LP small. Options are cheapest first, so it is enough to compare each with the
	// options kept before it.
	dims := len(core) + len(ext)
	c := lpColumns{rooms: make([][]float64, len(p.opts))}
	flat := make([]float64, len(p.opts)*dims)
	for i := range p.opts {
		room := p.room(i, flat[i*dims:(i+1)*dims:(i+1)*dims])
		c.rooms[i] = room
		dominated := false
		for k, j := range c.option {
			if p.opts[j].price > p.opts[i].price {
				break
			}
			covers := true
			for d := range room {
				covers = covers && c.cols[k][d] >= room[d]
			}
			if dominated = covers; dominated {
				break
			}
		}
		if !dominated {
			c.cols = append(c.cols, room)
			c.prices = append(c.prices, p.opts[i].price)
			c.option = append(c.option, i)
		}
	}
	p.lpCache[key] = c
	p.cols, p.prices, p.lpOption, p.rooms = c.cols, c.prices, c.option, c.rooms
}

// lpColumns are the columns of the LP over some resources: what each option kept offers of them,
// its price, and which option it is; and what every option offers (rooms).
type lpColumns struct {
	cols   [][]float64
	prices []float64
	option []int
	rooms  [][]float64
}

// room writes what option i offers beyond the base in each LP resource into out.
func (p *packer) room(i int, out []float64) []float64 {
	o := &p.opts[i].alloc
	for d, r := range p.coreDims {
		out[d] = float64(max(o.core[r]-p.base.core[r], 0))
	}
	for d, name := range p.extDims {
		out[len(p.coreDims)+d] = float64(max(o.extended[name]-p.base.extended[name], 0))
	}
	return out
}

// score is what the packer's fill rule gives add on a node of room full holding used, each
// resource as a share of the node: over every resource of the LP for fillAligned, over the scarce
// ones (all when none is) for the others.
func (p *packer) score(used, add *vec, full []float64) float64 {
	var dot, aa, rr float64
	lo, hi := math.Inf(1), math.Inf(-1)
	term := func(d int) {
		if full[d] <= 0 {
			return
		}
		a := float64(p.dimOf(add, d)) / full[d]
		r := (full[d] - float64(p.dimOf(used, d)-p.dimOf(&p.base, d))) / full[d]
		dot, aa, rr = dot+a*r, aa+a*a, rr+r*r
		lo, hi = min(lo, r-a), max(hi, r-a)
	}
	if len(p.scarce) > 0 && p.rule != fillAligned {
		for _, d := range p.scarce {
			term(d)
		}
	} else {
		for d := range full {
			term(d)
		}
	}
	switch {
	case p.rule == fillEven:
		if hi < lo {
			return 0
		}
		return lo - hi
	case aa == 0 || rr == 0:
		return 0
	case p.rule == fillBalanced:
		return dot / math.Sqrt(rr) / math.Pow(aa, 0.25)
	}
	return dot
}

// dimOf is what r requests of LP resource d.
func (p *packer) dimOf(r *vec, d int) int64 {
	if d < len(p.coreDims) {
		return r.core[p.coreDims[d]]
	}
	return r.extended[p.extDims[d-len(p.coreDims)]]
}

// fill packs a node of option o, starting with a pod of shape first, and returns it with the
// cheapest option that fits what it holds.
func (p *packer) fill(o, first int) packedNode {
	n := packedNode{used: p.base.plus(vec{})}
	add := func(s int) {
		n.used.addInPlace(&p.shapes[s].req)
		p.demand.subInPlace(&p.shapes[s].req)
		p.left[s]--
		if k := len(n.counts); k > 0 && n.counts[k-1].shape == s {
			n.counts[k-1].count++
		} else {
			n.counts = append(n.counts, shapeCount{shape: s, count: 1})
		}
	}
	add(first)
	// The room of the node, in the LP's resources.
	full := p.room(o, make([]float64, len(p.coreDims)+len(p.extDims)))
	for {
		best, bestScore := -1, math.Inf(-1)
		for _, s := range p.order { // largest first, so that ties go to larger pods
			if p.left[s] == 0 || !p.fits(o, &n.used, &p.shapes[s].req) {
				continue
			}
			if score := p.score(&n.used, &p.shapes[s].req, full); score > bestScore+1e-12 {
				best, bestScore = s, score
			}
		}
		if best < 0 {
			break
		}
		add(best)
	}
	slices.SortFunc(n.counts, func(a, b shapeCount) int { return cmp.Compare(a.shape, b.shape) })
	merged := n.counts[:0]
	for _, c := range n.counts {
		if k := len(merged); k > 0 && merged[k-1].shape == c.shape {
			merged[k-1].count += c.count
			continue
		}
		merged = append(merged, c)
	}
	n.counts = merged
	var zero vec
	n.option = o
	for i := range p.opts {
		if p.fits(i, &n.used, &zero) {
			n.option = i
			break
		}
	}
	return n
}
