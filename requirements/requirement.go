package requirements

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Requirement is the set of states one node label may be in: a set of allowed values (or, when it
// is a complement, every value except a set), optionally narrowed to integers within exclusive
// bounds, and whether a node without the label is allowed at all.
//
// In [a b] allows a and b; NotIn [a] allows every other value and an absent label; Exists allows
// every value; DoesNotExist allows only an absent label; Gt 3 allows the integers 4, 5, ...
// The zero Requirement allows nothing. Values are kept sorted, so checks need no maps.
type Requirement struct {
	key        string
	values     []string // sorted, unique: allowed values, or excluded values when complement
	complement bool
	absent     bool // a node without the label satisfies it
	hasLower   bool
	hasUpper   bool
	lower      int64 // exclusive lower bound, only with complement
	upper      int64 // exclusive upper bound, only with complement
	minValues  int   // 0 when unset
}

// NewRequirement returns the requirement of a node selector operator on key, with the key
// normalised (beta labels become their stable keys). It rejects what the API would: In without
// values, Exists or DoesNotExist with values, and Gt, Lt, Gte or Lte without exactly one integer.
func NewRequirement(key string, op corev1.NodeSelectorOperator, values ...string) (Requirement, error) {
	key = karpv1.NormalizedLabelKey(key)
	switch op {
	case corev1.NodeSelectorOpIn:
		if len(values) == 0 {
			return Requirement{}, fmt.Errorf("requirement %s In: give at least one value", key)
		}
		return In(key, values...), nil
	case corev1.NodeSelectorOpNotIn:
		return NotIn(key, values...), nil
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(values) != 0 {
			return Requirement{}, fmt.Errorf("requirement %s %s: takes no values, got %q", key, op, values)
		}
		if op == corev1.NodeSelectorOpExists {
			return Exists(key), nil
		}
		return DoesNotExist(key), nil
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		if len(values) != 1 {
			return Requirement{}, fmt.Errorf("requirement %s %s: give exactly one integer value, got %q", key, op, values)
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return Requirement{}, fmt.Errorf("requirement %s %s: value %q is not an integer", key, op, values[0])
		}
		return bound(key, op, n), nil
	default:
		return Requirement{}, fmt.Errorf("requirement %s: unknown operator %q (use In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte)", key, op)
	}
}

// In returns the requirement that the label key be present with one of values. With no values it
// allows nothing.
func In(key string, values ...string) Requirement {
	return Requirement{key: karpv1.NormalizedLabelKey(key), values: sortedUnique(values)}
}

// NotIn returns the requirement that the label key be absent or have none of values.
func NotIn(key string, values ...string) Requirement {
	return Requirement{key: karpv1.NormalizedLabelKey(key), values: sortedUnique(values), complement: true, absent: true}
}

// Exists returns the requirement that the label key be present, with any value.
func Exists(key string) Requirement {
	return Requirement{key: karpv1.NormalizedLabelKey(key), complement: true}
}

// DoesNotExist returns the requirement that the label key be absent.
func DoesNotExist(key string) Requirement {
	return Requirement{key: karpv1.NormalizedLabelKey(key), absent: true}
}

// Any returns the requirement that allows every state of the label key, present or not. It is
// the identity of Intersect.
func Any(key string) Requirement {
	return Requirement{key: karpv1.NormalizedLabelKey(key), complement: true, absent: true}
}

func bound(key string, op corev1.NodeSelectorOperator, n int64) Requirement {
	r := Requirement{key: key, complement: true}
	switch op {
	case corev1.NodeSelectorOpGt:
		r.hasLower, r.lower = true, n
	case karpv1.NodeSelectorOpGte:
		if n != math.MinInt64 {
			r.hasLower, r.lower = true, n-1
		}
	case corev1.NodeSelectorOpLt:
		r.hasUpper, r.upper = true, n
	case karpv1.NodeSelectorOpLte:
		if n != math.MaxInt64 {
			r.hasUpper, r.upper = true, n+1
		}
	}
	return r
}

// WithMinValues returns a copy of r that asks the scheduler to keep at least n distinct values of
// the key available (Karpenter's minValues). n <= 0 clears it.
func (r Requirement) WithMinValues(n int) Requirement {
	r.minValues = max(n, 0)
	return r
}

// Key returns the (normalised) label key.
func (r Requirement) Key() string { return r.key }

// MinValues returns the minimum number of distinct values to keep available, 0 when unset.
func (r Requirement) MinValues() int { return r.minValues }

// AllowsAbsent reports whether a node without the label satisfies r.
func (r Requirement) AllowsAbsent() bool { return r.absent }

// IsComplement reports whether r allows every value except a finite set (NotIn, Exists, Gt, Lt).
func (r Requirement) IsComplement() bool { return r.complement }

// Values returns the allowed values of a finite requirement (In), sorted; nil for a complement.
// The slice must not be modified.
func (r Requirement) Values() []string {
	if r.complement {
		return nil
	}
	return r.values
}

// Len returns the number of allowed values: the size of a finite set, the size of an integer
// range less its exclusions (capped at math.MaxInt), or math.MaxInt when unbounded.
func (r Requirement) Len() int {
	if !r.complement {
		return len(r.values)
	}
	size, bounded := integerRange(r.hasLower, r.lower, r.hasUpper, r.upper)
	if !bounded {
		return math.MaxInt
	}
	excluded := uint64(len(r.values))
	if excluded >= size {
		return 0
	}
	if n := size - excluded; n < math.MaxInt {
		return int(n)
	}
	return math.MaxInt
}

// integerRange returns how many int64 values lie strictly between the exclusive bounds. A missing
// bound is the end of the int64 range, since a bounded label value must parse as an int64: Gt of
// the largest int64 allows nothing. bounded is false when neither bound is set.
func integerRange(hasLower bool, lower int64, hasUpper bool, upper int64) (size uint64, bounded bool) {
	switch {
	case hasLower && hasUpper:
		return rangeSize(lower, upper), true
	case hasLower: // (lower, MaxInt64], computed modulo 2^64
		return uint64(math.MaxInt64) - uint64(lower), true
	case hasUpper: // [MinInt64, upper): upper + 2^63, computed modulo 2^64
		return uint64(upper) + 1<<63, true
	}
	return 0, false
}

// Single returns the only allowed value when r requires the label with exactly one value.
func (r Requirement) Single() (string, bool) {
	if r.complement || r.absent || len(r.values) != 1 {
		return "", false
	}
	return r.values[0], true
}

// Has reports whether a node with the label set to value satisfies r.
func (r Requirement) Has(value string) bool {
	if !r.complement {
		_, found := slices.BinarySearch(r.values, value)
		return found
	}
	if !r.inBounds(value) {
		return false
	}
	_, found := slices.BinarySearch(r.values, value)
	return !found
}

// Matches reports whether a node whose label is value (present) or missing (!present) satisfies r.
func (r Requirement) Matches(value string, present bool) bool {
	if !present {
		return r.absent
	}
	return r.Has(value)
}

// IsEmpty reports whether r allows no state at all, so that no node can satisfy it.
func (r Requirement) IsEmpty() bool {
	return !r.absent && r.Len() == 0
}

func (r Requirement) bounded() bool { return r.hasLower || r.hasUpper }

// inBounds reports whether value is an integer within r's bounds (true when r has none).
func (r Requirement) inBounds(value string) bool {
	if !r.bounded() {
		return true
	}
	n, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		return false
	}
	return (!r.hasLower || n > r.lower) && (!r.hasUpper || n < r.upper)
}

// rangeSize is the number of integers strictly between lower and upper.
func rangeSize(lower, upper int64) uint64 {
	if upper <= lower {
		return 0
	}
	return uint64(upper) - uint64(lower) - 1
}

// Intersect returns the states both r and o allow, keeping the larger minValues. The key is r's.
func (r Requirement) Intersect(o Requirement) Requirement {
	out := Requirement{key: r.key, absent: r.absent && o.absent, minValues: max(r.minValues, o.minValues)}
	switch {
	case !r.complement && !o.complement:
		out.values = intersectSorted(r.values, o.values)
	case !r.complement:
		out.values = filterAllowed(r.values, o)
	case !o.complement:
		out.values = filterAllowed(o.values, r)
	default:
		out.complement = true
		out.hasLower, out.lower = tighterLower(r, o)
		out.hasUpper, out.upper = tighterUpper(r, o)
		out.values = unionSorted(r.values, o.values)
		if out.bounded() {
			out.values = slices.DeleteFunc(out.values, func(v string) bool { return !out.inBounds(v) })
		}
	}
	return out
}

// Union returns a requirement allowing every state r or o allows, keeping the larger minValues.
// Integer bounds are over-approximated by their hull, so the union may allow a little more than
// r or o (values in a gap between two ranges); it is exact for sets without bounds.
func (r Requirement) Union(o Requirement) Requirement {
	out := Requirement{key: r.key, absent: r.absent || o.absent, minValues: max(r.minValues, o.minValues)}
	switch {
	case !r.complement && !o.complement:
		out.values = unionSorted(r.values, o.values)
	case !r.complement || !o.complement:
		fin, comp := r, o
		if r.complement {
			fin, comp = o, r
		}
		out.complement = true
		keepBounds := comp.bounded()
		for _, v := range fin.values {
			if !comp.inBounds(v) {
				keepBounds = false
				break
			}
		}
		if keepBounds {
			out.hasLower, out.lower, out.hasUpper, out.upper = comp.hasLower, comp.lower, comp.hasUpper, comp.upper
		}
		out.values = slices.DeleteFunc(slices.Clone(comp.values), func(v string) bool {
			_, found := slices.BinarySearch(fin.values, v)
			return found
		})
	default:
		out.complement = true
		if r.hasLower && o.hasLower {
			out.hasLower, out.lower = true, min(r.lower, o.lower)
		}
		if r.hasUpper && o.hasUpper {
			out.hasUpper, out.upper = true, max(r.upper, o.upper)
		}
		for _, v := range unionSorted(r.values, o.values) {
			if !r.Has(v) && !o.Has(v) {
				out.values = append(out.values, v)
			}
		}
	}
	return out
}

// Intersects reports whether some node label state satisfies both r and o. It does not allocate.
func (r Requirement) Intersects(o Requirement) bool {
	if r.absent && o.absent {
		return true
	}
	switch {
	case !r.complement && !o.complement:
		return sortedOverlap(r.values, o.values)
	case !r.complement:
		return anyAllowed(r.values, o)
	case !o.complement:
		return anyAllowed(o.values, r)
	}
	hasLower, lower := tighterLower(r, o)
	hasUpper, upper := tighterUpper(r, o)
	size, bounded := integerRange(hasLower, lower, hasUpper, upper)
	if !bounded {
		return true // infinitely many strings remain, finitely many are excluded
	}
	if size == 0 {
		return false
	}
	excluded := uint64(0)
	i, j := 0, 0
	for i < len(r.values) || j < len(o.values) {
		var v string
		switch {
		case j >= len(o.values) || (i < len(r.values) && r.values[i] < o.values[j]):
			v = r.values[i]
			i++
		case i >= len(r.values) || o.values[j] < r.values[i]:
			v = o.values[j]
			j++
		default:
			v = r.values[i]
			i++
			j++
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && (!hasLower || n > lower) && (!hasUpper || n < upper) {
			excluded++
		}
	}
	return excluded < size
}

func tighterLower(r, o Requirement) (bool, int64) {
	switch {
	case r.hasLower && o.hasLower:
		return true, max(r.lower, o.lower)
	case r.hasLower:
		return true, r.lower
	case o.hasLower:
		return true, o.lower
	}
	return false, 0
}

func tighterUpper(r, o Requirement) (bool, int64) {
	switch {
	case r.hasUpper && o.hasUpper:
		return true, min(r.upper, o.upper)
	case r.hasUpper:
		return true, r.upper
	case o.hasUpper:
		return true, o.upper
	}
	return false, 0
}

// anyAllowed reports whether some of the sorted values satisfy the complement requirement c.
func anyAllowed(values []string, c Requirement) bool {
	for _, v := range values {
		if c.Has(v) {
			return true
		}
	}
	return false
}

// filterAllowed returns the values that the complement requirement c allows, in a new slice.
func filterAllowed(values []string, c Requirement) []string {
	var out []string
	for _, v := range values {
		if c.Has(v) {
			out = append(out, v)
		}
	}
	return out
}

// Operator returns the node selector operator that best names r: In, NotIn, Exists, DoesNotExist,
// Gt or Lt. A requirement built by Union or Intersect may need more than one operator to express;
// NodeSelectorRequirements gives the exact form.
func (r Requirement) Operator() corev1.NodeSelectorOperator {
	switch {
	case !r.complement && r.absent && len(r.values) == 0:
		return corev1.NodeSelectorOpDoesNotExist
	case !r.complement:
		return corev1.NodeSelectorOpIn
	case r.hasLower:
		return corev1.NodeSelectorOpGt
	case r.hasUpper:
		return corev1.NodeSelectorOpLt
	case r.absent:
		return corev1.NodeSelectorOpNotIn
	}
	return corev1.NodeSelectorOpExists
}

// NodeSelectorRequirements expresses r as Kubernetes node selector requirements that all must
// hold: none for an unconstrained key, up to four for a complement with bounds. A union of a value
// set with an absent label (In [a] or DoesNotExist) has no such form; it is left out, which only
// makes the result allow more. An empty requirement comes out as In without values, which the API
// rejects: check IsEmpty first.
func (r Requirement) NodeSelectorRequirements() []corev1.NodeSelectorRequirement {
	if !r.complement {
		switch {
		case !r.absent:
			return []corev1.NodeSelectorRequirement{{Key: r.key, Operator: corev1.NodeSelectorOpIn, Values: slices.Clone(r.values)}}
		case len(r.values) == 0:
			return []corev1.NodeSelectorRequirement{{Key: r.key, Operator: corev1.NodeSelectorOpDoesNotExist}}
		}
		return nil
	}
	var out []corev1.NodeSelectorRequirement
	if len(r.values) > 0 {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.key, Operator: corev1.NodeSelectorOpNotIn, Values: slices.Clone(r.values)})
	}
	if r.absent {
		return out // bounds would forbid the absent label; leaving them out only allows more
	}
	if r.hasLower {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.key, Operator: corev1.NodeSelectorOpGt, Values: []string{strconv.FormatInt(r.lower, 10)}})
	}
	if r.hasUpper {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.key, Operator: corev1.NodeSelectorOpLt, Values: []string{strconv.FormatInt(r.upper, 10)}})
	}
	if len(out) == 0 || (len(r.values) > 0 && !r.bounded()) {
		out = append(out, corev1.NodeSelectorRequirement{Key: r.key, Operator: corev1.NodeSelectorOpExists})
	}
	return out
}

// String formats r as "key In [a b]", "key NotIn [a]", "key Exists", "key Gt 3 Lt 9" and so on.
func (r Requirement) String() string {
	return r.key + " " + r.describe()
}

// describe formats the allowed states of r without its key.
func (r Requirement) describe() string {
	var b strings.Builder
	if !r.complement {
		switch {
		case !r.absent:
			fmt.Fprintf(&b, "In [%s]", strings.Join(r.values, " "))
		case len(r.values) == 0:
			b.WriteString("DoesNotExist")
		default:
			fmt.Fprintf(&b, "In [%s] or DoesNotExist", strings.Join(r.values, " "))
		}
		return b.String()
	}
	parts := make([]string, 0, 3)
	switch {
	case len(r.values) > 0 && r.absent:
		parts = append(parts, fmt.Sprintf("NotIn [%s]", strings.Join(r.values, " ")))
	case len(r.values) > 0:
		parts = append(parts, fmt.Sprintf("Exists NotIn [%s]", strings.Join(r.values, " ")))
	case r.absent && !r.bounded():
		parts = append(parts, "Any")
	case !r.bounded():
		parts = append(parts, "Exists")
	}
	if r.hasLower {
		parts = append(parts, "Gt "+strconv.FormatInt(r.lower, 10))
	}
	if r.hasUpper {
		parts = append(parts, "Lt "+strconv.FormatInt(r.upper, 10))
	}
	if r.absent && r.bounded() {
		parts = append(parts, "or DoesNotExist")
	}
	return strings.Join(parts, " ")
}

// describeAllowed formats the allowed states for the right side of a conflict message: a plain
// value list for a finite set ("[amd64]"), the operator form otherwise.
func (r Requirement) describeAllowed() string {
	if !r.complement && !r.absent {
		return "[" + strings.Join(r.values, " ") + "]"
	}
	return r.describe()
}

func sortedUnique(values []string) []string {
	if len(values) == 0 {
		return nil
	}
	out := slices.Clone(values)
	slices.Sort(out)
	return slices.Compact(out)
}

func intersectSorted(a, b []string) []string {
	var out []string
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func unionSorted(a, b []string) []string {
	if len(a) == 0 {
		return slices.Clone(b)
	}
	if len(b) == 0 {
		return slices.Clone(a)
	}
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			out = append(out, a[i])
			i++
		case a[i] > b[j]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return append(out, b[j:]...)
}

func sortedOverlap(a, b []string) bool {
	if len(a) > len(b) {
		a, b = b, a
	}
	if len(a) == 0 {
		return false
	}
	if len(a)*8 < len(b) {
		// A few values against many: binary search beats a merge.
		for _, v := range a {
			if _, found := slices.BinarySearch(b, v); found {
				return true
			}
		}
		return false
	}
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			return true
		}
	}
	return false
}
