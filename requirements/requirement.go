package requirements

import (
	"fmt"
	"math"
	"slices"
	"strconv"

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
