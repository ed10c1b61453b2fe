package pack

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/coverlp"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// priceEpsilon is the difference below which two prices are taken as equal.
const priceEpsilon = 1e-9

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

// Option is an option the packer may give a node: its allocatable and price.
type Option struct {
	Alloc resources.Vec
	Price float64
}

// Shape is a request (Req) shared by Count pods.
type Shape struct {
	Req   resources.Vec
	Count int
}

// Node is a node of a packing: the cheapest option that fits what it holds (Option, an index
// into the options), what it holds (Used, base included), and how many pods of each shape.
type Node struct {
	Option int
	Used   resources.Vec
	Counts []ShapeCount
}

// ShapeCount is how many pods (Count) of one shape (Shape, an index into the shapes) a packed
// node holds.
type ShapeCount struct {
	Shape, Count int
}

// packer holds the state of one packing.
type packer struct {
	rule   fillRule
	opts   []Option // cheapest first
	base   resources.Vec
	shapes []Shape
	order  []int         // shapes in the order their pods open nodes
	left   []int         // pods of each shape not packed yet
	demand resources.Vec // what those pods request
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
	weights [resources.NumCore]float64 // to compare cpu and memory (Pack's weights)
}

// Pack packs the pods of shapes onto nodes of opts (cheapest first), each node starting from
// base (the DaemonSets); weights make cpu and memory comparable for the pod order. It returns the
// nodes of the cheapest packing the fill rules give and their total price, or a price of -1 when
// some pod fits no option.
func Pack(opts []Option, base resources.Vec, shapes []Shape, weights [resources.NumCore]float64) ([]Node, float64) {
	var best []Node
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
func packWith(rule fillRule, opts []Option, base resources.Vec, shapes []Shape, weights [resources.NumCore]float64, cache map[string]lpColumns) ([]Node, float64) {
	p := &packer{rule: rule, opts: opts, base: base, shapes: shapes, left: make([]int, len(shapes)), weights: weights, lpCache: cache}
	for i, sh := range shapes {
		p.left[i] = sh.Count
		for range sh.Count {
			p.demand.Add(&sh.Req)
		}
		p.order = append(p.order, i)
	}
	slices.SortStableFunc(p.order, func(a, b int) int {
		ea, eb := len(shapes[a].Req.Extended) > 0, len(shapes[b].Req.Extended) > 0
		if ea != eb {
			if ea {
				return -1
			}
			return 1
		}
		return cmp.Compare(p.size(&shapes[b].Req), p.size(&shapes[a].Req))
	})
	var nodes []Node
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
		total += p.opts[n.Option].Price
		nodes = append(nodes, n)
	}
}

// size is the dominant share of a request.
func (p *packer) size(r *resources.Vec) float64 {
	return max(float64(r.Core[resources.CPU])*p.weights[resources.CPU], float64(r.Core[resources.Memory])*p.weights[resources.Memory])
}

// fits reports whether add joins used on option o.
func (p *packer) fits(o int, used, add *resources.Vec) bool {
	if used.Extended == nil && add.Extended == nil {
		return resources.FitsCore(used, add, &p.opts[o].Alloc.Core)
	}
	return resources.FitsSum(used, add, &p.opts[o].Alloc)
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
		demand = append(demand, float64(p.demand.Core[r]))
	}
	for _, name := range p.extDims {
		demand = append(demand, float64(p.demand.Extended[name]))
	}
	lp := coverlp.Solve(p.cols, p.prices, demand)
	counts := make([]float64, len(p.opts)) // how many of each option the LP's optimum takes
	for j, n := range lp.Counts {
		counts[p.lpOption[j]] = n
	}
	room := make([]float64, dims)
	needs := resources.NeedsOf(&p.base, &p.shapes[first].Req)
	var need [8]int64 // what q requests of each LP resource
	for d := range min(dims, len(need)) {
		need[d] = p.dimOf(&p.shapes[first].Req, d)
	}

	p.scarce = p.scarce[:0]
	for d, y := range lp.Prices {
		if y > 0 {
			p.scarce = append(p.scarce, d)
		}
	}
	q := &p.shapes[first].Req
	identical := p.pendingShapes() == 1
	best, bestEff, bestFit := -1, 0.0, 0.0
	// Only the LP's columns need a look: an option another no dearer one matches in every
	// resource the pods ask for is never more efficient, nor used by the LP.
	for _, i := range p.lpOption {
		if !resources.FitsCore(&p.base, q, &p.opts[i].Alloc.Core) || (!needs.None() && !needs.FitIn(&p.opts[i].Alloc)) {
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
		eff := value / max(p.opts[i].Price, 1e-12)
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
func needOf(need *[8]int64, q *resources.Vec, p *packer, d int) int64 {
	if d < len(need) {
		return need[d]
	}
	return p.dimOf(q, d)
}

// cosine is the cosine of the angle between request r and room, both measured as shares of the
// pending demand.
func (p *packer) cosine(r *resources.Vec, room, demand []float64) float64 {
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
	core := make([]int, 0, resources.NumCore)
	for r := range resources.NumCore {
		if p.demand.Core[r] > 0 {
			core = append(core, r)
		}
	}
	var ext []corev1.ResourceName
	for name, n := range p.demand.Extended {
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
		p.cols, p.prices, p.lpOption, p.rooms = c.cols, c.prices, c.options, c.rooms
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
		for k, j := range c.options {
			if p.opts[j].Price > p.opts[i].Price {
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
			c.prices = append(c.prices, p.opts[i].Price)
			c.options = append(c.options, i)
		}
	}
	p.lpCache[key] = c
	p.cols, p.prices, p.lpOption, p.rooms = c.cols, c.prices, c.options, c.rooms
}

// lpColumns are the columns of the LP over some resources: what each option kept offers of them,
// its price, and which option it is; and what every option offers (rooms).
type lpColumns struct {
	cols    [][]float64
	prices  []float64
	options []int
	rooms   [][]float64
}

// room writes what option i offers beyond the base in each LP resource into out.
func (p *packer) room(i int, out []float64) []float64 {
	o := &p.opts[i].Alloc
	for d, r := range p.coreDims {
		out[d] = float64(max(o.Core[r]-p.base.Core[r], 0))
	}
	for d, name := range p.extDims {
		out[len(p.coreDims)+d] = float64(max(o.Extended[name]-p.base.Extended[name], 0))
	}
	return out
}

// score is what the packer's fill rule gives add on a node of room full holding used, each
// resource as a share of the node: over every resource of the LP for fillAligned, over the scarce
// ones (all when none is) for the others.
func (p *packer) score(used, add *resources.Vec, full []float64) float64 {
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
func (p *packer) dimOf(r *resources.Vec, d int) int64 {
	if d < len(p.coreDims) {
		return r.Core[p.coreDims[d]]
	}
	return r.Extended[p.extDims[d-len(p.coreDims)]]
}

// fill packs a node of option o, starting with a pod of shape first, and returns it with the
// cheapest option that fits what it holds.
func (p *packer) fill(o, first int) Node {
	n := Node{Used: p.base.Plus(resources.Vec{})}
	add := func(s int) {
		n.Used.Add(&p.shapes[s].Req)
		p.demand.Sub(&p.shapes[s].Req)
		p.left[s]--
		if k := len(n.Counts); k > 0 && n.Counts[k-1].Shape == s {
			n.Counts[k-1].Count++
		} else {
			n.Counts = append(n.Counts, ShapeCount{Shape: s, Count: 1})
		}
	}
	add(first)
	// The room of the node, in the LP's resources.
	full := p.room(o, make([]float64, len(p.coreDims)+len(p.extDims)))
	for {
		best, bestScore := -1, math.Inf(-1)
		for _, s := range p.order { // largest first, so that ties go to larger pods
			if p.left[s] == 0 || !p.fits(o, &n.Used, &p.shapes[s].Req) {
				continue
			}
			if score := p.score(&n.Used, &p.shapes[s].Req, full); score > bestScore+1e-12 {
				best, bestScore = s, score
			}
		}
		if best < 0 {
			break
		}
		add(best)
	}
	slices.SortFunc(n.Counts, func(a, b ShapeCount) int { return cmp.Compare(a.Shape, b.Shape) })
	merged := n.Counts[:0]
	for _, c := range n.Counts {
		if k := len(merged); k > 0 && merged[k-1].Shape == c.Shape {
			merged[k-1].Count += c.Count
			continue
		}
		merged = append(merged, c)
	}
	n.Counts = merged
	var zero resources.Vec
	n.Option = o
	for i := range p.opts {
		if p.fits(i, &n.Used, &zero) {
			n.Option = i
			break
		}
	}
	return n
}
