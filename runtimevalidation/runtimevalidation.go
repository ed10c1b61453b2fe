// Package runtimevalidation checks the parts of NodePool and NodeClaim specs that the CRD schema and CEL
// rules cannot reject: label keys and values of any length and syntax, operators given values they
// ignore, unknown well-known values, minValues counting duplicates, over-long taints, duplicate taints.
// Karpenter runs the same kind of checks after admission and reports them as ValidationSucceeded=False.
//
// The functions are pure (no client, no clock), so every front end gives the same verdict: the
// validating webhook denies what they report, and the NodePool status controller reports it on NodePools
// that got past the webhook (created while it was down, or before Joiner was installed). This package
// must not grow checks that need the cluster or the instance-type catalog; those stay in the webhooks.
package runtimevalidation

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// wellKnownValues are the only values some well-known label keys take; a requirement naming any other
// value is a typo that silently matches no node (In) or excludes nothing (NotIn).
var wellKnownValues = map[string]sets.Set[string]{
	karpv1.CapacityTypeLabelKey: sets.New(karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand, karpv1.CapacityTypeReserved),
}

// NodePool returns the runtime-validation errors of a NodePool's template, in a stable order: template
// labels (sorted by key), then requirements, then taints and startup taints. Nil means valid.
func NodePool(np *karpv1.NodePool) field.ErrorList {
	tpl := field.NewPath("spec", "template")
	spec := tpl.Child("spec")
	var errs field.ErrorList
	errs = append(errs, labels(tpl.Child("metadata", "labels"), np.Spec.Template.Labels)...)
	errs = append(errs, requirements(spec.Child("requirements"), np.Spec.Template.Spec.Requirements)...)
	errs = append(errs, taints(spec, np.Spec.Template.Spec.Taints, np.Spec.Template.Spec.StartupTaints)...)
	return errs
}

// NodeClaim returns the runtime-validation errors of a NodeClaim's spec: requirements, then taints and
// startup taints. Its labels are object metadata, which the API server validates itself. Nil means valid.
func NodeClaim(nc *karpv1.NodeClaim) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, requirements(spec.Child("requirements"), nc.Spec.Requirements)...)
	errs = append(errs, taints(spec, nc.Spec.Taints, nc.Spec.StartupTaints)...)
	return errs
}

// Messages renders errors as users read them in a denial or a condition, one line each:
// "<field path>: <what is wrong>; <how to fix it>".
func Messages(errs field.ErrorList) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Field + ": " + e.Detail
	}
	return out
}

// labels checks template label keys (the CRD constrains only their domain) and values.
func labels(path *field.Path, m map[string]string) field.ErrorList {
	var errs field.ErrorList
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		p := path.Key(k)
		if reasons := validation.IsQualifiedName(k); len(reasons) > 0 {
			errs = append(errs, field.Invalid(p, k, fmt.Sprintf("key %q is not a valid label key: %s; rename the label", k, joinReasons(reasons))))
		}
		if reasons := validation.IsValidLabelValue(m[k]); len(reasons) > 0 {
			errs = append(errs, field.Invalid(p, m[k], fmt.Sprintf("value %q is not a valid label value: %s; change the value", m[k], joinReasons(reasons))))
		}
	}
	return errs
}

// requirements checks each requirement's key and values, the operators that take no values, the values
// of well-known keys, and that minValues counts distinct values.
func requirements(path *field.Path, reqs []karpv1.NodeSelectorRequirementWithMinValues) field.ErrorList {
	var errs field.ErrorList
	for i, r := range reqs {
		p := path.Index(i)
		if reasons := validation.IsQualifiedName(r.Key); len(reasons) > 0 {
			errs = append(errs, field.Invalid(p.Child("key"), r.Key, fmt.Sprintf("%q is not a valid label key: %s; shorten or rename the key", r.Key, joinReasons(reasons))))
		}
		if instead := valuesInstead(r.Operator); instead != "" && len(r.Values) > 0 {
			errs = append(errs, field.Invalid(p.Child("values"), r.Values, fmt.Sprintf("operator %s takes no values, got [%s]; remove the values, or %s",
				r.Operator, strings.Join(r.Values, ", "), instead)))
			// The operator ignores them: they are reported once, not checked one by one.
			continue
		}
		known := wellKnownValues[karpv1.NormalizedLabelKey(r.Key)]
		for j, v := range r.Values {
			vp := p.Child("values").Index(j)
			if reasons := validation.IsValidLabelValue(v); len(reasons) > 0 {
				errs = append(errs, field.Invalid(vp, v, fmt.Sprintf("%q is not a valid label value: %s; change the value", v, joinReasons(reasons))))
				continue
			}
			if known != nil && !known.Has(v) {
				errs = append(errs, &field.Error{Type: field.ErrorTypeNotSupported, Field: vp.String(), BadValue: v,
					Detail: fmt.Sprintf("%q is not a %s value; use %s", v, r.Key, orList(sets.List(known)))})
			}
		}
		if r.Operator == corev1.NodeSelectorOpIn && r.MinValues != nil {
			if distinct := sets.New(r.Values...).Len(); distinct < *r.MinValues {
				errs = append(errs, field.Invalid(p.Child("minValues"), *r.MinValues, fmt.Sprintf(
					"minValues %d needs %d distinct values, but values [%s] hold %d (duplicates count once); add distinct values or lower minValues",
					*r.MinValues, *r.MinValues, strings.Join(r.Values, ", "), distinct)))
			}
		}
	}
	return errs
}

// valuesInstead returns, for an operator that takes no values, the operator to use to constrain
// values; "" for the operators that take values.
func valuesInstead(op corev1.NodeSelectorOperator) string {
	switch op {
	case corev1.NodeSelectorOpExists:
		return "use operator In to require those values"
	case corev1.NodeSelectorOpDoesNotExist:
		return "use operator NotIn to exclude those values"
	}
	return ""
}

// taints checks taint keys and values as Kubernetes checks a Node's (the CRD bounds neither length), and
// that no two taints, across taints and startupTaints, share key and effect: the node would carry one of
// them only.
func taints(specPath *field.Path, ts, startup []karpv1.Taint) field.ErrorList {
	type identity struct {
		key    string
		effect corev1.TaintEffect
	}
	var errs field.ErrorList
	seen := map[identity]*field.Path{}
	check := func(list *field.Path, ts []karpv1.Taint) {
		for i, t := range ts {
			p := list.Index(i)
			if reasons := validation.IsQualifiedName(t.Key); len(reasons) > 0 {
				errs = append(errs, field.Invalid(p.Child("key"), t.Key, fmt.Sprintf("%q is not a valid taint key: %s; shorten or rename the key", t.Key, joinReasons(reasons))))
			}
			if reasons := validation.IsValidLabelValue(t.Value); len(reasons) > 0 {
				errs = append(errs, field.Invalid(p.Child("value"), t.Value, fmt.Sprintf("%q is not a valid taint value: %s; change the value", t.Value, joinReasons(reasons))))
			}
			id := identity{t.Key, t.Effect}
			if first, dup := seen[id]; dup {
				errs = append(errs, &field.Error{Type: field.ErrorTypeDuplicate, Field: p.String(), BadValue: t.String(),
					Detail: fmt.Sprintf("taint %s duplicates %s (same key and effect); remove one of them", t, first)})
				continue
			}
			seen[id] = p
		}
	}
	check(specPath.Child("taints"), ts)
	check(specPath.Child("startupTaints"), startup)
	return errs
}

// joinReasons joins the reasons of k8s.io/apimachinery/pkg/util/validation into one clause.
func joinReasons(reasons []string) string {
	return strings.Join(reasons, " and ")
}

// orList renders values as "a, b or c".
func orList(values []string) string {
	if len(values) < 2 {
		return strings.Join(values, "")
	}
	return strings.Join(values[:len(values)-1], ", ") + " or " + values[len(values)-1]
}
