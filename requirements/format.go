package requirements

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

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
