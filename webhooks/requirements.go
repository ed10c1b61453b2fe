package webhooks

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"
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
	// req is what the constraint allows (see requirementOf).
	req requirements.Requirement
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
			req:    requirementOf(k, corev1.NodeSelectorOpIn, []string{labels[k]}),
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
			req:       requirementOf(r.Key, r.Operator, r.Values),
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
	allowed := map[string]requirements.Requirement{}
	for _, c := range cs {
		sofar, ok := allowed[c.key]
		if !ok {
			sofar = requirements.Any(c.key)
		}
		if next := sofar.Intersect(c.req); !next.IsEmpty() {
			allowed[c.key] = next
			byKey[c.key] = append(byKey[c.key], c)
			continue
		}
		out = append(out, explainContradiction(c, byKey[c.key]))
	}
	return out
}

func explainContradiction(c constraint, earlier []constraint) string {
	for _, p := range earlier {
		if !p.req.Intersects(c.req) {
			return fmt.Sprintf("%s: %s contradicts %s (%s); no node can satisfy both, remove one or change its values", c.field, c, p.field, p)
		}
	}
	if c.req.IsEmpty() {
		return fmt.Sprintf("%s: %s matches no label value; change its values", c.field, c)
	}
	descs := make([]string, len(earlier))
	for i, p := range earlier {
		descs[i] = p.String()
	}
	return fmt.Sprintf("%s: %s contradicts the earlier constraints on %s (%s); no node can satisfy all of them, remove or change one", c.field, c, c.rawKey, strings.Join(descs, "; "))
}

// requirementOf is what a constraint allows, in the requirement algebra the scheduler uses.
// Malformed constraints (which the CRD's CEL rejects) constrain nothing, except In without values,
// which no value satisfies. Integer bounds also imply a non-negative value: label values cannot
// start with '-'.
func requirementOf(key string, op corev1.NodeSelectorOperator, values []string) requirements.Requirement {
	r, err := requirements.NewRequirement(key, op, values...)
	switch {
	case err == nil && isBound(op):
		nonNegative, _ := requirements.NewRequirement(key, karpv1.NodeSelectorOpGte, "0")
		return r.Intersect(nonNegative)
	case err == nil:
		return r
	case op == corev1.NodeSelectorOpIn:
		return requirements.In(key)
	default:
		return requirements.Any(key)
	}
}
