package requirements

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// ForPod returns the alternative node requirements a pod accepts, in the order of its required
// node affinity terms: each is the pod's nodeSelector intersected with one term (the terms are
// ORed). A pod without required node affinity has one alternative, its nodeSelector. Terms
// without match expressions match no node and are skipped; matchFields are not modelled.
//
// The error names the term and key of an invalid requirement, or says that no term can match.
func ForPod(pod *corev1.Pod) ([]Requirements, error) {
	base := FromLabels(pod.Spec.NodeSelector)
	var terms []corev1.NodeSelectorTerm
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		if len(terms) == 0 {
			return nil, fmt.Errorf("pod %s/%s: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution has no terms, so no node matches; add a term or remove it", pod.Namespace, pod.Name)
		}
	}
	if terms == nil {
		return []Requirements{base}, nil
	}
	out := make([]Requirements, 0, len(terms))
	for i, term := range terms {
		if len(term.MatchExpressions) == 0 {
			continue
		}
		reqs, err := FromNodeSelectorRequirements(term.MatchExpressions...)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: required node affinity term %d: %w", pod.Namespace, pod.Name, i, err)
		}
		out = append(out, base.Intersect(reqs))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pod %s/%s: every required node affinity term is empty, so no node matches; give the terms matchExpressions", pod.Namespace, pod.Name)
	}
	return out, nil
}

// Preference is one preferred node affinity term of a pod, with its weight.
type Preference struct {
	// Weight is the term's weight, 1 to 100.
	Weight int32
	// Requirements are the term's match expressions.
	Requirements Requirements
}

// PreferencesForPod returns the pod's preferred node affinity terms, heaviest first (terms of
// equal weight keep their order). Empty terms are skipped.
func PreferencesForPod(pod *corev1.Pod) ([]Preference, error) {
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil {
		return nil, nil
	}
	var out []Preference
	for i, term := range a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
		if len(term.Preference.MatchExpressions) == 0 {
			continue
		}
		reqs, err := FromNodeSelectorRequirements(term.Preference.MatchExpressions...)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: preferred node affinity term %d: %w", pod.Namespace, pod.Name, i, err)
		}
		out = append(out, Preference{Weight: term.Weight, Requirements: reqs})
	}
	slices.SortStableFunc(out, func(a, b Preference) int { return cmp.Compare(b.Weight, a.Weight) })
	return out, nil
}
