package requirements

import (
	"slices"
	"strconv"
)

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

// tighterLower returns the lower bound of both r and o: the larger of the two, or the one that is set.
func tighterLower(r, o Requirement) (bool, int64) {
	return tighterBound(r.hasLower, r.lower, o.hasLower, o.lower, true)
}

// tighterUpper returns the upper bound of both r and o: the smaller of the two, or the one that is set.
func tighterUpper(r, o Requirement) (bool, int64) {
	return tighterBound(r.hasUpper, r.upper, o.hasUpper, o.upper, false)
}

// tighterBound combines two optional bounds into the tighter one: the larger (lower bounds) or the
// smaller (upper bounds) when both are set, else the one that is.
func tighterBound(hasA bool, a int64, hasB bool, b int64, lower bool) (bool, int64) {
	switch {
	case hasA && hasB && lower:
		return true, max(a, b)
	case hasA && hasB:
		return true, min(a, b)
	case hasA:
		return true, a
	case hasB:
		return true, b
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
	for i, j, ok := nextCommon(a, b, 0, 0); ok; i, j, ok = nextCommon(a, b, i+1, j+1) {
		out = append(out, a[i])
	}
	return out
}

// nextCommon walks the sorted a and b from a[i] and b[j] to the next value both hold and returns
// its positions; ok is false when there is none.
func nextCommon(a, b []string, i, j int) (int, int, bool) {
	for i < len(a) && j < len(b) {
		switch {
		case a[i] < b[j]:
			i++
		case a[i] > b[j]:
			j++
		default:
			return i, j, true
		}
	}
	return i, j, false
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
	_, _, ok := nextCommon(a, b, 0, 0)
	return ok
}
