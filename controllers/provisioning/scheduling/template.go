package scheduling

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// instanceTypeInfo is an instance type with its resources converted once, by Prepare.
type instanceTypeInfo struct {
	instanceType *cloudprovider.InstanceType
	alloc        resources.Vec
	capacity     resources.Vec
}

// poolTemplate is the part of a NodePool's preparation that depends only on the NodePool, its
// instance types, the DaemonSets and the Options: computed once by Prepare and never changed
// afterwards, so that any number of simulations, also concurrent ones, share it.
type poolTemplate struct {
	index int // position in weight order
	input int // position in the NodePools given to Prepare
	pool  *karpv1.NodePool
	name  string
	// reqs is what a node from the NodePool may look like: the NodePool's requirements and labels
	// intersected with the union of its instance types' labels and offerings. Pods are checked
	// against it; a key it lacks is a label such nodes never carry.
	reqs requirements.Requirements
	// spec is what the NodeClaim spec says: the NodePool's requirements and labels only.
	spec   requirements.Requirements
	taints []corev1.Taint
	// instanceTypes are the instance types compatible with reqs, cheapest first.
	instanceTypes []instanceTypeInfo
	// base are the options of reqs; baseHash is reqs.Hash().
	base     *optionSet
	baseHash uint64
	// daemon is what the DaemonSet pods that run on every node of the NodePool request; varying
	// are those that run on some of its nodes only (daemons.go).
	daemon    resources.Vec
	varying   varyingDaemons
	minValues bool
	// err says why the NodePool cannot launch anything; it is then skipped.
	err error
}

// template is a NodePool as one simulation uses it: the shared poolTemplate plus the state the
// simulation changes (limits reserved so far, option sets computed so far, topology domains).
type template struct {
	*poolTemplate
	limits limits
	// options caches option sets by requirements hash; pinned caches pinnedOptions.
	options map[uint64][]*optionSet
	pinned  map[pinKey]*optionSet
	// domains are the topology domains reqs already fixes, per topology key; -1 when open.
	domains []int32
}

// newTemplate starts a simulation's view of a prepared NodePool with the given remaining limits.
func newTemplate(pt *poolTemplate, remaining corev1.ResourceList) *template {
	t := &template{poolTemplate: pt, limits: newLimits(remaining), options: map[uint64][]*optionSet{}}
	if pt.base != nil {
		t.options[pt.baseHash] = []*optionSet{pt.base}
	}
	return t
}

// limits track a NodePool's remaining limits against the capacity planned from it. A NodeClaim
// reserves the capacity of its cheapest fitting instance type while packing; finalize narrows
// the options so that the largest option of every NodeClaim together stays within the limits.
type limits struct {
	limited         [resources.NumCore]bool
	remaining       resources.Vec
	limitedExtended map[corev1.ResourceName]bool
	nodes           int64 // remaining NodeClaims, -1 when unlimited
	reserved        resources.Vec
	claims          int64
}

func newLimits(remaining corev1.ResourceList) limits {
	l := limits{nodes: -1}
	for name, q := range remaining {
		if name == "nodes" {
			l.nodes = q.Value()
			continue
		}
		if i := resources.CoreIndex(name); i >= 0 {
			l.limited[i] = true
		} else {
			if l.limitedExtended == nil {
				l.limitedExtended = map[corev1.ResourceName]bool{}
			}
			l.limitedExtended[name] = true
		}
		l.remaining.Set(name, q)
	}
	return l
}

// allows reports whether swapping a reservation of before for after (and adding newClaims
// NodeClaims) stays within the limits, and if not which resource breaks them.
func (l *limits) allows(before, after *resources.Vec, newClaims int64) (bool, string) {
	if l.nodes >= 0 && l.claims+newClaims > l.nodes {
		return false, fmt.Sprintf("nodes (%d left)", l.nodes-l.claims)
	}
	for i := range l.limited {
		if l.limited[i] && l.reserved.Core[i]-before.Core[i]+after.Core[i] > l.remaining.Core[i] {
			return false, string(resources.CoreName(i))
		}
	}
	for name := range l.limitedExtended {
		if l.reserved.Extended[name]-before.Extended[name]+after.Extended[name] > l.remaining.Extended[name] {
			return false, string(name)
		}
	}
	return true, ""
}

func (l *limits) any() bool {
	return l.nodes >= 0 || l.limited != [resources.NumCore]bool{} || len(l.limitedExtended) > 0
}

// optionSet is the instance types of a template that are compatible with one set of NodeClaim
// requirements, ordered by the price of their cheapest compatible offering. It is shared by every
// NodeClaim with the same requirements, and never changed once built.
type optionSet struct {
	reqs        requirements.Requirements
	typeIndices []int32 // indices into poolTemplate.instanceTypes
	price       []float64
	alloc       [][resources.NumCore]int64
	maxAlloc    [resources.NumCore]int64
	hasExtended bool
}

// cheapestFit returns the first option from `from` on that fits used+add, or -1.
func (o *optionSet) cheapestFit(t *template, from int, used, add *resources.Vec) int {
	needs := resources.NeedsOf(used, add)
	for i := from; i < len(o.typeIndices); i++ {
		if !resources.FitsCore(used, add, &o.alloc[i]) {
			continue
		}
		if !needs.None() && !needs.FitIn(&t.instanceTypes[o.typeIndices[i]].alloc) {
			continue
		}
		return i
	}
	return -1
}

// newPoolTemplate prepares a NodePool, or returns a template with err set that explains why the
// NodePool cannot be used. np.Remaining is not read: limits are per simulation.
func newPoolTemplate(index int, np NodePool, daemonSets []*podInfo) *poolTemplate {
	t := &poolTemplate{index: index, input: index, pool: np.NodePool, name: np.NodePool.Name}
	spec := &np.NodePool.Spec.Template
	poolReqs, err := requirements.FromNodeSelectorRequirementsWithMinValues(spec.Spec.Requirements...)
	if err != nil {
		t.err = fmt.Errorf("invalid spec.template.spec.requirements: %w", err)
		return t
	}
	t.minValues = poolReqs.HasMinValues()
	t.spec = poolReqs.Intersect(requirements.FromLabels(spec.Labels))
	t.spec.Add(requirements.In(karpv1.NodePoolLabelKey, t.name))
	for _, r := range t.spec.Items() {
		if r.IsEmpty() {
			t.err = fmt.Errorf("spec.template requirement and label %s contradict each other; make them agree", r.Key())
			return t
		}
	}
	t.taints = karpv1.TaintsToCore(spec.Spec.Taints)

	var compatible []*cloudprovider.InstanceType
	for _, it := range np.InstanceTypes {
		if it.CompatibleWith(t.spec) {
			compatible = append(compatible, it)
		}
	}
	if len(compatible) == 0 {
		t.err = fmt.Errorf("none of its %d instance types has an available offering compatible with its requirements %s", len(np.InstanceTypes), t.spec)
		return t
	}
	t.reqs = t.spec.Intersect(unionOf(compatible, t.spec))
	priced := make([]struct {
		it    *cloudprovider.InstanceType
		price float64
	}, 0, len(compatible))
	for _, it := range compatible {
		o, _ := it.CheapestOffering(t.reqs)
		priced = append(priced, struct {
			it    *cloudprovider.InstanceType
			price float64
		}{it, o.Price})
	}
	slices.SortStableFunc(priced, func(a, b struct {
		it    *cloudprovider.InstanceType
		price float64
	}) int {
		return cmp.Compare(a.price, b.price)
	})
	t.instanceTypes = make([]instanceTypeInfo, len(priced))
	for i, p := range priced {
		t.instanceTypes[i] = instanceTypeInfo{instanceType: p.it, alloc: resources.CapacityOf(p.it.Allocatable()), capacity: resources.Of(p.it.Capacity)}
	}
	t.prepareDaemons(daemonSets)
	t.base, t.baseHash = t.buildOptions(t.reqs), t.reqs.Hash()
	return t
}

// unionOf returns, per label key any of the instance types or their available offerings
// constrains, the union of what each type allows under spec: its own requirement, narrowed, when
// offerings define the key, to the values of its available offerings compatible with spec. A type
// whose requirements and offerings both lack the key adds the absent label.
func unionOf(its []*cloudprovider.InstanceType, spec requirements.Requirements) requirements.Requirements {
	keys := map[string]bool{} // key -> defined by some offering
	var offered cloudprovider.Offerings
	bounds := make([]int, len(its)+1) // offered[bounds[i]:bounds[i+1]] are type i's offerings
	for i, it := range its {
		for _, r := range it.Requirements.Items() {
			keys[r.Key()] = keys[r.Key()] || false
		}
		for _, o := range it.Offerings {
			if o.Available && o.CompatibleWith(spec) {
				offered = append(offered, o)
				for _, r := range o.Requirements.Items() {
					keys[r.Key()] = true
				}
			}
		}
		bounds[i+1] = len(offered)
	}
	out := make([]requirements.Requirement, 0, len(keys))
	for key, byOffering := range keys {
		var u typeUnion
		for i, it := range its {
			r, inType := it.Requirements.Get(key)
			if !byOffering {
				if inType {
					u.add(r)
				} else {
					u.absent = true
				}
				continue
			}
			ofs := offered[bounds[i]:bounds[i+1]]
			open, defined := len(ofs) == 0, false
			for _, o := range ofs {
				or, ok := o.Requirements.Get(key)
				if !ok || or.IsComplement() || or.AllowsAbsent() {
					open = true
					break
				}
				defined = true
			}
			switch {
			case !inType && !defined:
				u.absent = true
			case open && inType:
				u.add(r)
			case open:
				u.add(requirements.Any(key))
			default:
				for _, o := range ofs {
					or, _ := o.Requirements.Get(key)
					for _, v := range or.Values() {
						if !inType || r.Has(v) {
							u.addValue(v)
						}
					}
				}
			}
		}
		out = append(out, u.requirement(key))
	}
	return requirements.New(out...)
}

// typeUnion accumulates the union of requirements on one key: finite values in a slice, and
// only complements through the general (slower) union.
type typeUnion struct {
	values      []string
	seen        map[string]struct{} // once values grows past a handful
	absent      bool
	complements *requirements.Requirement
}

// addValue records a value once: most types repeat the same few (zones, architectures).
func (u *typeUnion) addValue(v string) {
	if u.seen == nil {
		if slices.Contains(u.values, v) {
			return
		}
		u.values = append(u.values, v)
		if len(u.values) > 16 {
			u.seen = make(map[string]struct{}, 64)
			for _, w := range u.values {
				u.seen[w] = struct{}{}
			}
		}
		return
	}
	if _, ok := u.seen[v]; !ok {
		u.seen[v] = struct{}{}
		u.values = append(u.values, v)
	}
}

func (u *typeUnion) add(r requirements.Requirement) {
	if !r.IsComplement() {
		for _, v := range r.Values() {
			u.addValue(v)
		}
		u.absent = u.absent || r.AllowsAbsent()
		return
	}
	c := r
	if u.complements != nil {
		c = u.complements.Union(r)
	}
	u.complements = &c
}

func (u *typeUnion) requirement(key string) requirements.Requirement {
	r := requirements.In(key, u.values...)
	if u.absent {
		r = r.Union(requirements.DoesNotExist(key))
	}
	if u.complements != nil {
		r = u.complements.Union(r)
	}
	return r
}

type pinKey struct {
	parent     *optionSet
	key, value string
}

// pinnedOptions returns the options of parent's requirements with key fixed to value, remembered
// by the simulation so that pinning a topology domain costs a map lookup.
func (t *template) pinnedOptions(parent *optionSet, key, value string) *optionSet {
	pk := pinKey{parent, key, value}
	if o, ok := t.pinned[pk]; ok {
		return o
	}
	reqs := parent.reqs
	reqs.Add(requirements.In(key, value))
	o := t.optionsFor(reqs)
	if t.pinned == nil {
		t.pinned = map[pinKey]*optionSet{}
	}
	t.pinned[pk] = o
	return o
}

// optionsFor returns the option set for NodeClaim requirements reqs, computing it on first use.
func (t *template) optionsFor(reqs requirements.Requirements) *optionSet {
	key := reqs.Hash()
	for _, o := range t.options[key] {
		if o.reqs.Equal(reqs) {
			return o
		}
	}
	set := t.buildOptions(reqs)
	t.options[key] = append(t.options[key], set)
	return set
}

// buildOptions computes the option set for NodeClaim requirements reqs.
func (t *poolTemplate) buildOptions(reqs requirements.Requirements) *optionSet {
	type opt struct {
		i     int32
		price float64
	}
	var opts []opt
	for i := range t.instanceTypes {
		it := t.instanceTypes[i].instanceType
		if _, conflict := reqs.FirstConflict(it.Requirements); conflict {
			continue
		}
		o, ok := it.CheapestOffering(reqs)
		if !ok {
			continue
		}
		opts = append(opts, opt{int32(i), o.Price})
	}
	slices.SortStableFunc(opts, func(a, b opt) int { return cmp.Compare(a.price, b.price) })
	set := &optionSet{reqs: reqs, typeIndices: make([]int32, len(opts)), price: make([]float64, len(opts)), alloc: make([][resources.NumCore]int64, len(opts))}
	for j, o := range opts {
		set.typeIndices[j], set.price[j] = o.i, o.price
		set.alloc[j] = t.optionAlloc(o.i, reqs)
		for r := range resources.NumCore {
			set.maxAlloc[r] = max(set.maxAlloc[r], set.alloc[j][r])
		}
		set.hasExtended = set.hasExtended || t.instanceTypes[o.i].alloc.Extended != nil
	}
	return set
}

// fittingTypes returns the options from index first on that fit used, in price order.
func (t *poolTemplate) fittingTypes(o *optionSet, first int, used *resources.Vec) cloudprovider.InstanceTypes {
	var out cloudprovider.InstanceTypes
	var zero resources.Vec
	for i := first; i >= 0 && i < len(o.typeIndices); i++ {
		if resources.FitsCore(used, &zero, &o.alloc[i]) && (used.Extended == nil || resources.FitsSum(used, &zero, &t.instanceTypes[o.typeIndices[i]].alloc)) {
			out = append(out, t.instanceTypes[o.typeIndices[i]].instanceType)
		}
	}
	return out
}

// weightOrder sorts templates by weight (higher first, unset as 0), then by name.
func weightOrder(a, b *poolTemplate) int {
	wa, wb := int32(0), int32(0)
	if a.pool.Spec.Weight != nil {
		wa = *a.pool.Spec.Weight
	}
	if b.pool.Spec.Weight != nil {
		wb = *b.pool.Spec.Weight
	}
	if wa != wb {
		return cmp.Compare(wb, wa)
	}
	return strings.Compare(a.name, b.name)
}

// priceOf returns the price of option i, or +Inf when there is none.
func (o *optionSet) priceOf(i int) float64 {
	if i < 0 || i >= len(o.price) {
		return math.Inf(1)
	}
	return o.price[i]
}
