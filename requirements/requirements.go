package requirements

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Requirements is a set of requirements, at most one per label key, that must all hold. It is a
// small value kept sorted by key; copies share storage, and every method that changes a set
// writes a new backing slice, so a copy is never changed behind its holder's back. The zero
// value is the empty set, which every node satisfies.
type Requirements struct {
	items []Requirement
}

// New returns the set of reqs, intersecting requirements that share a key.
func New(reqs ...Requirement) Requirements {
	if len(reqs) == 0 {
		return Requirements{}
	}
	items := slices.Clone(reqs)
	slices.SortStableFunc(items, func(a, b Requirement) int { return strings.Compare(a.key, b.key) })
	return mergeSorted(items)
}

// FromLabels returns one In requirement per label: the requirements a node with exactly these
// labels satisfies, and the ones a pod's nodeSelector asks for.
func FromLabels(labels map[string]string) Requirements {
	items := make([]Requirement, 0, len(labels))
	for k, v := range labels {
		items = append(items, In(k, v))
	}
	slices.SortFunc(items, func(a, b Requirement) int { return strings.Compare(a.key, b.key) })
	// Two labels can share a key after normalisation (a beta and a stable label); mergeSorted
	// intersects them.
	return mergeSorted(items)
}

// FromNodeSelectorRequirements returns the set of Kubernetes node selector requirements, all of
// which must hold. Its error names the offending key and operator.
func FromNodeSelectorRequirements(reqs ...corev1.NodeSelectorRequirement) (Requirements, error) {
	return fromEach(reqs, func(r corev1.NodeSelectorRequirement) (Requirement, error) {
		return NewRequirement(r.Key, r.Operator, r.Values...)
	})
}

// FromNodeSelectorRequirementsWithMinValues returns the set of Karpenter requirements (NodePool
// template or NodeClaim spec), keeping minValues. Its error names the offending key and operator.
func FromNodeSelectorRequirementsWithMinValues(reqs ...karpv1.NodeSelectorRequirementWithMinValues) (Requirements, error) {
	return fromEach(reqs, func(r karpv1.NodeSelectorRequirementWithMinValues) (Requirement, error) {
		req, err := NewRequirement(r.Key, r.Operator, r.Values...)
		if err != nil || r.MinValues == nil {
			return req, err
		}
		if *r.MinValues < 1 {
			return Requirement{}, fmt.Errorf("requirement %s: minValues must be at least 1, got %d", req.key, *r.MinValues)
		}
		if r.Operator == corev1.NodeSelectorOpIn && len(req.values) < *r.MinValues {
			return Requirement{}, fmt.Errorf("requirement %s: minValues %d needs at least that many values, got %d", req.key, *r.MinValues, len(req.values))
		}
		return req.WithMinValues(*r.MinValues), nil
	})
}

// fromEach returns the set of the requirements build makes of each of reqs, or the first error.
func fromEach[T any](reqs []T, build func(T) (Requirement, error)) (Requirements, error) {
	items := make([]Requirement, 0, len(reqs))
	for _, r := range reqs {
		req, err := build(r)
		if err != nil {
			return Requirements{}, err
		}
		items = append(items, req)
	}
	return New(items...), nil
}

// Len returns the number of keys.
func (rs Requirements) Len() int { return len(rs.items) }

// Items returns the requirements sorted by key. The slice must not be modified.
func (rs Requirements) Items() []Requirement { return rs.items }

// Keys returns the keys, sorted.
func (rs Requirements) Keys() []string {
	out := make([]string, len(rs.items))
	for i, r := range rs.items {
		out[i] = r.key
	}
	return out
}

func (rs Requirements) index(key string) (int, bool) {
	items := rs.items
	if len(items) <= 8 {
		for i := range items {
			if items[i].key >= key {
				return i, items[i].key == key
			}
		}
		return len(items), false
	}
	lo, hi := 0, len(items)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if items[mid].key < key {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(items) && items[lo].key == key
}

// Get returns the requirement on key (normalised), and whether there is one.
func (rs Requirements) Get(key string) (Requirement, bool) {
	i, ok := rs.index(karpv1.NormalizedLabelKey(key))
	if !ok {
		return Requirement{}, false
	}
	return rs.items[i], true
}

// Has reports whether the set constrains key (normalised).
func (rs Requirements) Has(key string) bool {
	_, ok := rs.index(karpv1.NormalizedLabelKey(key))
	return ok
}

// Add intersects reqs into the set, in place: a key already present keeps only the states both
// allow. It reports whether the set changed. The previous backing slice is left untouched.
func (rs *Requirements) Add(reqs ...Requirement) bool {
	changed := false
	for _, r := range reqs {
		i, ok := rs.index(r.key)
		if ok {
			merged := rs.items[i].Intersect(r)
			if merged.Equal(rs.items[i]) {
				continue
			}
			items := slices.Clone(rs.items)
			items[i] = merged
			rs.items = items
			changed = true
			continue
		}
		items := make([]Requirement, 0, len(rs.items)+1)
		items = append(items, rs.items[:i]...)
		items = append(items, r)
		rs.items = append(items, rs.items[i:]...)
		changed = true
	}
	return changed
}

// Intersect returns a new set holding the states both rs and o allow.
func (rs Requirements) Intersect(o Requirements) Requirements {
	out := make([]Requirement, 0, len(rs.items)+len(o.items))
	i, j := 0, 0
	for i < len(rs.items) && j < len(o.items) {
		a, b := rs.items[i], o.items[j]
		switch {
		case a.key < b.key:
			out = append(out, a)
			i++
		case a.key > b.key:
			out = append(out, b)
			j++
		default:
			out = append(out, a.Intersect(b))
			i++
			j++
		}
	}
	out = append(out, rs.items[i:]...)
	out = append(out, o.items[j:]...)
	return Requirements{items: out}
}

// Equal reports whether r and o allow the same states and carry the same minValues.
func (r Requirement) Equal(o Requirement) bool {
	return r.key == o.key && r.complement == o.complement && r.absent == o.absent &&
		r.hasLower == o.hasLower && r.hasUpper == o.hasUpper &&
		(!r.hasLower || r.lower == o.lower) && (!r.hasUpper || r.upper == o.upper) &&
		r.minValues == o.minValues && slices.Equal(r.values, o.values)
}

// Equal reports whether the two sets hold equal requirements on the same keys.
func (rs Requirements) Equal(o Requirements) bool {
	return slices.EqualFunc(rs.items, o.items, Requirement.Equal)
}

// Conflict names the key on which two requirement sets cannot both hold, with both sides.
type Conflict struct {
	// Key is the label key.
	Key string
	// Want is the requirement of the side being placed (the pod, or the argument of Intersects).
	Want Requirement
	// Have is the requirement of the side it is placed on (the node or NodeClaim, the receiver).
	// When Missing is set, the receiver does not define the key at all.
	Have Requirement
	// Missing is set when the receiver does not define Key and Want needs the label to exist.
	Missing bool
}

// newConflict moves c to the heap only on the error path, so that successful checks do not allocate.
func newConflict(c Conflict) *Conflict { return &c }

// Error formats the conflict as "incompatible requirement kubernetes.io/arch In [arm64] vs
// [amd64]", or "... vs label not defined" when the receiver lacks the key.
func (c *Conflict) Error() string {
	if c.Missing {
		return fmt.Sprintf("incompatible requirement %s %s vs label not defined", c.Key, c.Want.describe())
	}
	return fmt.Sprintf("incompatible requirement %s %s vs %s", c.Key, c.Want.describe(), c.Have.describeAllowed())
}

// FirstConflict returns the first key (in key order) on which rs and o both have requirements
// that no label state satisfies together; keys only one side constrains never conflict. It does
// not allocate.
func (rs Requirements) FirstConflict(o Requirements) (Conflict, bool) {
	a, b := rs.items, o.items
	if len(b) < len(a) && len(b) <= 4 {
		for _, want := range b {
			if i, ok := rs.index(want.key); ok && !a[i].Intersects(want) {
				return Conflict{Key: want.key, Want: want, Have: a[i]}, true
			}
		}
		return Conflict{}, false
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i].key < b[j].key:
			i++
		case a[i].key > b[j].key:
			j++
		default:
			if !a[i].Intersects(b[j]) {
				return Conflict{Key: a[i].key, Want: b[j], Have: a[i]}, true
			}
			i++
			j++
		}
	}
	return Conflict{}, false
}

// Intersects returns nil when some node could satisfy both sets: every key both constrain keeps
// a common state. Otherwise it returns a *Conflict naming the first such key. Keys constrained on
// one side only are not checked; see Compatible for that.
func (rs Requirements) Intersects(o Requirements) error {
	if c, ok := rs.FirstConflict(o); ok {
		return newConflict(c)
	}
	return nil
}

// FirstIncompatibility is Compatible without the error value: it reports the first key of pod
// that the node side rs cannot satisfy. It does not allocate.
func (rs Requirements) FirstIncompatibility(pod Requirements) (Conflict, bool) {
	for _, want := range pod.items {
		i, ok := rs.index(want.key)
		if !ok {
			if !want.absent {
				return Conflict{Key: want.key, Want: want, Missing: true}, true
			}
			continue
		}
		if !rs.items[i].Intersects(want) {
			return Conflict{Key: want.key, Want: want, Have: rs.items[i]}, true
		}
	}
	return Conflict{}, false
}

// Compatible returns nil when a node described by rs (the labels it has or may have) can satisfy
// the pod-side requirements pod. Unlike Intersects, a key that rs does not define counts as a
// label the node will not carry, so pod must allow it to be absent (NotIn, DoesNotExist).
// Otherwise it returns a *Conflict naming the first offending key.
func (rs Requirements) Compatible(pod Requirements) error {
	if c, ok := rs.FirstIncompatibility(pod); ok {
		return newConflict(c)
	}
	return nil
}

// Labels returns the labels the set fixes: each key that must be present with exactly one value.
func (rs Requirements) Labels() map[string]string {
	out := map[string]string{}
	for _, r := range rs.items {
		if v, ok := r.Single(); ok {
			out[r.key] = v
		}
	}
	return out
}

// HasMinValues reports whether any requirement carries minValues.
func (rs Requirements) HasMinValues() bool {
	for _, r := range rs.items {
		if r.minValues > 0 {
			return true
		}
	}
	return false
}

// NodeSelectorRequirements expresses the set as Karpenter requirements, with minValues on the
// first requirement of each key that carries it. Keys in skip are left out (for instance the
// restricted kubernetes.io/hostname).
func (rs Requirements) NodeSelectorRequirements(skip ...string) []karpv1.NodeSelectorRequirementWithMinValues {
	out := make([]karpv1.NodeSelectorRequirementWithMinValues, 0, len(rs.items))
	for _, r := range rs.items {
		if slices.Contains(skip, r.key) {
			continue
		}
		for i, nsr := range r.NodeSelectorRequirements() {
			req := karpv1.NodeSelectorRequirementWithMinValues{Key: nsr.Key, Operator: nsr.Operator, Values: nsr.Values}
			if i == 0 && r.minValues > 0 {
				mv := r.minValues
				req.MinValues = &mv
			}
			out = append(out, req)
		}
	}
	return out
}

// String formats the set as "key1 In [a], key2 Exists", in key order.
func (rs Requirements) String() string {
	parts := make([]string, len(rs.items))
	for i, r := range rs.items {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// Hash returns a hash of the set's contents (keys, values, operators, bounds and minValues), for
// use as a map key together with Equal. It does not allocate.
func (rs Requirements) Hash() uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	str := func(s string) {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * prime
		}
		h = (h ^ 0xff) * prime
	}
	num := func(n uint64) {
		for i := 0; i < 8; i++ {
			h = (h ^ (n & 0xff)) * prime
			n >>= 8
		}
	}
	for _, r := range rs.items {
		str(r.key)
		flags := uint64(0)
		for i, f := range []bool{r.complement, r.absent, r.hasLower, r.hasUpper} {
			if f {
				flags |= 1 << i
			}
		}
		num(flags)
		num(uint64(r.lower))
		num(uint64(r.upper))
		num(uint64(r.minValues))
		num(uint64(len(r.values)))
		for _, v := range r.values {
			str(v)
		}
	}
	return h
}

// mergeSorted returns the set of items, which are sorted by key, intersecting neighbours that share
// a key. It reuses items' backing array.
func mergeSorted(items []Requirement) Requirements {
	out := items[:0]
	for _, it := range items {
		if n := len(out); n > 0 && out[n-1].key == it.key {
			out[n-1] = out[n-1].Intersect(it)
			continue
		}
		out = append(out, it)
	}
	return Requirements{items: out}
}
