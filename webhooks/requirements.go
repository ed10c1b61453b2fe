package webhooks

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// constraint is one restriction on a node label: a node requirement, or a template label (which pins the
// label to one value, like `In [value]`).
type constraint struct {
	// field is the path reported in messages: spec.template.spec.requirements[2] or
	// spec.template.metadata.labels[kubernetes.io/arch].
	field string
	// key is the label key with deprecated beta keys normalized to their stable form; rawKey is the key
	// as written.
	key, rawKey string
	op          corev1.NodeSelectorOperator
	values      []string
	minValues   *int
	// label is set for a template label rather than a requirement.
	label bool
}

// String renders the constraint as the user wrote it: "key In [a, b]", "key Exists", "key Gt 4" or, for a
// label, "key=value".
func (c constraint) String() string {
	switch {
	case c.label:
		return c.rawKey + "=" + c.values[0]
	case c.op == corev1.NodeSelectorOpExists || c.op == corev1.NodeSelectorOpDoesNotExist:
		return c.rawKey + " " + string(c.op)
	case isBound(c.op) && len(c.values) == 1:
		return c.rawKey + " " + string(c.op) + " " + c.values[0]
	}
	return c.rawKey + " " + string(c.op) + " [" + strings.Join(c.values, ", ") + "]"
}

func isBound(op corev1.NodeSelectorOperator) bool {
	switch op {
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		return true
	}
	return false
}

// constraintsOf lists the constraints of a template: its labels first, sorted by key, then its
// requirements in order. labelsField and requirementsField are the paths of the two lists.
func constraintsOf(labelsField string, labels map[string]string, requirementsField string, reqs []karpv1.NodeSelectorRequirementWithMinValues) []constraint {
	out := make([]constraint, 0, len(labels)+len(reqs))
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		out = append(out, constraint{
			field:  fmt.Sprintf("%s[%s]", labelsField, k),
			key:    karpv1.NormalizedLabelKey(k),
			rawKey: k,
			op:     corev1.NodeSelectorOpIn,
			values: []string{labels[k]},
			label:  true,
		})
	}
	for i, r := range reqs {
		out = append(out, constraint{
			field:     fmt.Sprintf("%s[%d]", requirementsField, i),
			key:       karpv1.NormalizedLabelKey(r.Key),
			rawKey:    r.Key,
			op:        r.Operator,
			values:    r.Values,
			minValues: r.MinValues,
		})
	}
	return out
}

// contradictions reports constraints that no node label could satisfy together with the constraints
// before them on the same key: `In [a]` and `NotIn [a]`, disjoint `In` lists, a label outside an `In`
// list, `Gt 8` with `Lt 4`, `Exists` with `DoesNotExist`. Each contradicting constraint is reported once,
// against the earlier constraint it conflicts with, and is then left out so later ones are judged
// against a satisfiable set.
func contradictions(cs []constraint) []string {
	var out []string
	byKey := map[string][]constraint{}
	domains := map[string]domain{}
	for _, c := range cs {
		d := domains[c.key].with(c)
		if d.satisfiable() {
			domains[c.key] = d
			byKey[c.key] = append(byKey[c.key], c)
			continue
		}
		out = append(out, explainContradiction(c, byKey[c.key]))
	}
	return out
}

func explainContradiction(c constraint, earlier []constraint) string {
	for _, p := range earlier {
		if !(domain{}).with(p).with(c).satisfiable() {
			return fmt.Sprintf("%s: %s contradicts %s (%s); no node can satisfy both, remove one or change its values", c.field, c, p.field, p)
		}
	}
	if !(domain{}).with(c).satisfiable() {
		return fmt.Sprintf("%s: %s matches no label value; change its values", c.field, c)
	}
	descs := make([]string, len(earlier))
	for i, p := range earlier {
		descs[i] = p.String()
	}
	return fmt.Sprintf("%s: %s contradicts the earlier constraints on %s (%s); no node can satisfy all of them, remove or change one", c.field, c, c.rawKey, strings.Join(descs, "; "))
}

// domain is the set of values one label may take under a conjunction of constraints. The zero value
// allows anything, including the label being absent.
type domain struct {
	exists, absent bool
	// in is the allowed values; nil means any value.
	in map[string]struct{}
	// notIn is the excluded values.
	notIn map[string]struct{}
	// lo and hi bound integer values, inclusive, when hasLo/hasHi. empty marks bounds that can never
	// hold (Gt of the largest integer).
	lo, hi       int64
	hasLo, hasHi bool
	empty        bool
}

// with returns d narrowed by c. It never modifies d's maps, so domains can be shared. Constraints with
// malformed values (which the CRD's CEL rejects) do not narrow the domain.
func (d domain) with(c constraint) domain {
	switch c.op {
	case corev1.NodeSelectorOpIn:
		d.exists = true
		next := make(map[string]struct{}, len(c.values))
		for _, v := range c.values {
			if _, ok := d.in[v]; d.in == nil || ok {
				next[v] = struct{}{}
			}
		}
		d.in = next
	case corev1.NodeSelectorOpNotIn:
		next := make(map[string]struct{}, len(d.notIn)+len(c.values))
		for v := range d.notIn {
			next[v] = struct{}{}
		}
		for _, v := range c.values {
			next[v] = struct{}{}
		}
		d.notIn = next
	case corev1.NodeSelectorOpExists:
		d.exists = true
	case corev1.NodeSelectorOpDoesNotExist:
		d.absent = true
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, karpv1.NodeSelectorOpGte, karpv1.NodeSelectorOpLte:
		if len(c.values) != 1 {
			return d
		}
		n, err := strconv.ParseInt(c.values[0], 10, 64)
		if err != nil {
			return d
		}
		d.exists = true
		switch c.op {
		case corev1.NodeSelectorOpGt:
			if n == math.MaxInt64 {
				d.empty = true
				return d
			}
			d.raiseLo(n + 1)
		case karpv1.NodeSelectorOpGte:
			d.raiseLo(n)
		case corev1.NodeSelectorOpLt:
			if n == math.MinInt64 {
				d.empty = true
				return d
			}
			d.lowerHi(n - 1)
		case karpv1.NodeSelectorOpLte:
			d.lowerHi(n)
		}
	}
	return d
}

func (d *domain) raiseLo(n int64) {
	if !d.hasLo || n > d.lo {
		d.lo, d.hasLo = n, true
	}
}

func (d *domain) lowerHi(n int64) {
	if !d.hasHi || n < d.hi {
		d.hi, d.hasHi = n, true
	}
}

func (d domain) inBounds(v string) bool {
	if !d.hasLo && !d.hasHi {
		return true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false
	}
	return (!d.hasLo || n >= d.lo) && (!d.hasHi || n <= d.hi)
}

// satisfiable reports whether some node label value (or the label's absence) meets every constraint.
func (d domain) satisfiable() bool {
	if d.exists && d.absent || d.empty {
		return false
	}
	if !d.exists {
		// The label may be absent, which satisfies NotIn and DoesNotExist.
		return true
	}
	if d.in != nil {
		for v := range d.in {
			if _, excluded := d.notIn[v]; !excluded && d.inBounds(v) {
				return true
			}
		}
		return false
	}
	if !d.hasLo && !d.hasHi {
		return true // any value outside the finite NotIn list
	}
	// Integer label values only. Label values cannot start with '-', so they are at least 0.
	lo, hi := int64(0), int64(math.MaxInt64)
	if d.hasLo && d.lo > lo {
		lo = d.lo
	}
	if d.hasHi {
		hi = d.hi
	}
	if lo > hi {
		return false
	}
	if uint64(hi-lo) >= uint64(len(d.notIn)) {
		return true // more integers in range than excluded values
	}
	for i := int64(0); i <= hi-lo; i++ {
		if _, excluded := d.notIn[strconv.FormatInt(lo+i, 10)]; !excluded {
			return true
		}
	}
	return false
}
