package state

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/tenancy"
)

// Tenancy is the NodePool tenancy (package tenancy) of a snapshot: the NodePools each bound
// namespace is bound to, and every NodePool the snapshot knows of. Every simulation Joiner runs
// passes the pods it places through Restrict (BuildInput does it for the pending pods, the
// disruption planner for the pods of the nodes it would remove), so that no simulated NodeClaim,
// whoever plans it, serves a pod of a namespace that is not bound to its NodePool; Refused is the
// last check of a NodeClaim about to be created. A nil *Tenancy binds nothing.
type Tenancy struct {
	bindings  map[string][]string
	nodePools []string
}

// NewTenancy returns the tenancy of namespaces (their tenancy.NodePoolsAnnotation), over the
// NodePools nodePools (the names Restrict keeps a bound namespace's pods away from).
func NewTenancy(namespaces []corev1.Namespace, nodePools []string) *Tenancy {
	t := &Tenancy{bindings: map[string][]string{}, nodePools: slices.Clone(nodePools)}
	for i := range namespaces {
		if bound := tenancy.BoundNodePools(&namespaces[i]); len(bound) > 0 {
			t.bindings[namespaces[i].Name] = bound
		}
	}
	return t
}

// Tenancy returns the tenancy of the snapshot: its namespaces' bindings over NodePoolNames(s).
func (s *ClusterState) Tenancy() *Tenancy {
	return NewTenancy(s.Namespaces, NodePoolNames(s))
}

// NodePoolNames returns, sorted, the name of every NodePool the snapshot knows of: the NodePools,
// and the karpenter.sh/nodepool label of every Node and NodeClaim (a NodePool may be gone while
// its nodes are not).
func NodePoolNames(s *ClusterState) []string {
	var names []string
	for i := range s.NodePools {
		names = append(names, s.NodePools[i].Name)
	}
	for i := range s.Nodes {
		names = append(names, s.Nodes[i].Labels[karpv1.NodePoolLabelKey])
	}
	for i := range s.NodeClaims {
		names = append(names, s.NodeClaims[i].Labels[karpv1.NodePoolLabelKey])
	}
	slices.Sort(names)
	names = slices.Compact(names)
	return slices.DeleteFunc(names, func(n string) bool { return n == "" })
}

// Bound returns the NodePools the namespace is bound to; nil when it is not bound (or t is nil).
func (t *Tenancy) Bound(namespace string) []string {
	if t == nil {
		return nil
	}
	return t.bindings[namespace]
}

// Forbidden returns the NodePools t knows of that the pods of namespace may not use, sorted;
// nil when the namespace is not bound.
func (t *Tenancy) Forbidden(namespace string) []string {
	bound := t.Bound(namespace)
	if len(bound) == 0 {
		return nil
	}
	return tenancy.Unbound(bound, t.nodePools)
}

// Restrict returns the pod as the simulation must see it: pod itself when its namespace is not
// bound or may use every NodePool t knows of; otherwise a copy that also requires
// karpenter.sh/nodepool NotIn [the other NodePools], so that a simulation places it neither on a
// new NodeClaim nor on an existing node of another tenant's NodePool, and may still place it on
// its own. Restricting a restricted pod again changes nothing. pod is never changed.
func (t *Tenancy) Restrict(pod *corev1.Pod) *corev1.Pod {
	forbidden := t.Forbidden(pod.Namespace)
	if len(forbidden) == 0 {
		return pod
	}
	return excludeNodePools(pod, forbidden)
}

// RestrictAll returns pods with every pod passed through Restrict; pods is not changed.
func (t *Tenancy) RestrictAll(pods []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, pod := range pods {
		out[i] = t.Restrict(pod)
	}
	return out
}

// Violations returns how pod's own spec (its node selection and tolerations, tenancy.Check)
// reaches for NodePools, among nodePools, that its namespace is not bound to; nil when the
// namespace is not bound.
func (t *Tenancy) Violations(pod *corev1.Pod, nodePools []karpv1.NodePool) []tenancy.Violation {
	bound := t.Bound(pod.Namespace)
	if len(bound) == 0 {
		return nil
	}
	return tenancy.Check(pod.Namespace, bound, pod, nodePools)
}

// Refused returns the pods, among pods, whose namespace is bound to NodePools other than
// nodePool: a NodeClaim of nodePool for them breaks the tenancy rule and must not be created.
// A NodeClaim for no pods (a static NodePool's) is never refused.
func (t *Tenancy) Refused(nodePool string, pods []*corev1.Pod) []*corev1.Pod {
	var out []*corev1.Pod
	for _, pod := range pods {
		if !tenancy.Allows(t.Bound(pod.Namespace), nodePool) {
			out = append(out, pod)
		}
	}
	return out
}

// excludeNodePools returns a copy of pod that also requires karpenter.sh/nodepool NotIn names:
// added to every required node affinity term that selects something (terms are ORed, so each must
// carry it), or as the only term when the pod has none. A term without match expressions and
// fields matches no node, so it is left alone, as is a required node affinity without terms (it
// matches no node either). A term that already carries the requirement is not given it twice.
func excludeNodePools(pod *corev1.Pod, names []string) *corev1.Pod {
	out := pod.DeepCopy()
	expr := corev1.NodeSelectorRequirement{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpNotIn, Values: slices.Clone(names)}
	if out.Spec.Affinity == nil {
		out.Spec.Affinity = &corev1.Affinity{}
	}
	if out.Spec.Affinity.NodeAffinity == nil {
		out.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := out.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{expr}}},
		}
		return out
	}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		term := &terms[i]
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		if slices.ContainsFunc(term.MatchExpressions, func(e corev1.NodeSelectorRequirement) bool { return equality.Semantic.DeepEqual(e, expr) }) {
			continue
		}
		term.MatchExpressions = append(term.MatchExpressions, expr)
	}
	return out
}
