// Package tenancy is the NodePool tenancy rule: a Namespace bound to NodePools (NodePoolsAnnotation)
// keeps its Pods on those NodePools. The Pod webhooks deny Pods that break it, the provisioner launches
// no capacity that would, and the audit reports Pods that got past a webhook outage, all with the
// functions here, so that they never disagree. It is pure: it reads no cluster state of its own (the
// callers pass the Namespace's binding and the NodePools) and never changes what it is given.
package tenancy

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Tenancy binding of namespaces to NodePools.
const (
	// NodePoolsAnnotation on a Namespace lists, comma-separated, the NodePools its Pods must run on:
	// joiner.dev/nodepools: "team-a,team-a-gpu". A namespace with at least one name is bound.
	NodePoolsAnnotation = "joiner.dev/nodepools"
	// BoundLabel with the value BoundLabelValue marks a bound Namespace so that the Pod webhooks'
	// namespaceSelector sends only its Pods. The rule itself goes by NodePoolsAnnotation.
	BoundLabel = "joiner.dev/nodepools"
	// BoundLabelValue is the value of BoundLabel on bound namespaces.
	BoundLabelValue = "bound"
)

// ReasonViolation is the reason of the Events that the provisioner and the audit record on a Pod that
// breaks the binding of its namespace.
const ReasonViolation = "TenancyViolation"

// BoundNodePools returns the NodePools a namespace is bound to, from its NodePoolsAnnotation: names
// trimmed, empty ones dropped, duplicates removed, in the order written. A nil namespace, or one without
// the annotation, is not bound.
func BoundNodePools(ns *corev1.Namespace) []string {
	if ns == nil {
		return nil
	}
	value, ok := ns.Annotations[NodePoolsAnnotation]
	if !ok {
		return nil
	}
	var pools []string
	for name := range strings.SplitSeq(value, ",") {
		name = strings.TrimSpace(name)
		if name != "" && !slices.Contains(pools, name) {
			pools = append(pools, name)
		}
	}
	return pools
}

// Allows reports whether the Pods of a namespace bound to the NodePools bound may run on nodes of the
// NodePool nodePool. Every NodePool is allowed when bound is empty (the namespace is not bound).
func Allows(bound []string, nodePool string) bool {
	return len(bound) == 0 || slices.Contains(bound, nodePool)
}

// Unbound returns the names, among names, of NodePools a namespace bound to bound may not use: in the
// order given, without duplicates. It returns nil when bound is empty (the namespace is not bound).
func Unbound(bound, names []string) []string {
	var out []string
	for _, name := range names {
		if !Allows(bound, name) && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// Violation is one way a Pod breaks the binding of its namespace.
type Violation struct {
	// Field is the path of the offending field, such as spec.tolerations[1].
	Field string
	// NodePools are the NodePools, not bound to the namespace, that the field reaches for.
	NodePools []string
	// Message says what is wrong and how to fix it, beginning with Field; the Pod webhook denies with it.
	Message string
}

// Check returns every violation of the binding of namespace (bound to bound) by pod: its node
// selection (Selection) and its tolerations (Tolerations). nodePools are the cluster's NodePools.
func Check(namespace string, bound []string, pod *corev1.Pod, nodePools []karpv1.NodePool) []Violation {
	return append(Selection(namespace, bound, pod), Tolerations(namespace, bound, pod, nodePools)...)
}

// Selection returns the violations of pod's node selection: a nodeSelector karpenter.sh/nodepool, or a
// required or preferred node affinity term with `karpenter.sh/nodepool In [...]`, naming a NodePool not
// in bound. It returns nil when bound is empty.
func Selection(namespace string, bound []string, pod *corev1.Pod) []Violation {
	if len(bound) == 0 {
		return nil
	}
	var out []Violation
	check := func(field string, values []string) {
		if names := Unbound(bound, values); len(names) > 0 {
			out = append(out, Violation{Field: field, NodePools: names, Message: fmt.Sprintf(
				"%s: NodePool %s is not bound to namespace %q (bound: %s); use only the bound NodePools",
				field, strings.Join(names, ", "), namespace, poolList(bound))})
		}
	}
	if name, ok := pod.Spec.NodeSelector[karpv1.NodePoolLabelKey]; ok {
		check(fmt.Sprintf("spec.nodeSelector[%s]", karpv1.NodePoolLabelKey), []string{name})
	}
	if pod.Spec.Affinity == nil || pod.Spec.Affinity.NodeAffinity == nil {
		return out
	}
	na := pod.Spec.Affinity.NodeAffinity
	if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
		for i, term := range req.NodeSelectorTerms {
			for j, e := range term.MatchExpressions {
				if selectsNodePools(e) {
					check(fmt.Sprintf("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d].matchExpressions[%d]", i, j), e.Values)
				}
			}
		}
	}
	for i, pref := range na.PreferredDuringSchedulingIgnoredDuringExecution {
		for j, e := range pref.Preference.MatchExpressions {
			if selectsNodePools(e) {
				check(fmt.Sprintf("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[%d].preference.matchExpressions[%d]", i, j), e.Values)
			}
		}
	}
	return out
}

// selectsNodePools reports whether a node selector requirement picks NodePools by name.
func selectsNodePools(e corev1.NodeSelectorRequirement) bool {
	return e.Key == karpv1.NodePoolLabelKey && e.Operator == corev1.NodeSelectorOpIn
}

// Tolerations returns the violations of pod's tolerations: a toleration of a taint that only NodePools
// not in bound carry. A toleration with operator Exists and no key tolerates every taint, so it breaks
// the binding as soon as another NodePool has a taint of its own. nodePools are the cluster's NodePools,
// in any order. It returns nil when bound is empty.
func Tolerations(namespace string, bound []string, pod *corev1.Pod, nodePools []karpv1.NodePool) []Violation {
	if len(bound) == 0 || len(pod.Spec.Tolerations) == 0 {
		return nil
	}
	foreign := foreignTaints(bound, nodePools)
	var out []Violation
	for i, tol := range pod.Spec.Tolerations {
		for _, ft := range foreign {
			if !tol.ToleratesTaint(logr.Discard(), &ft.taint, true) {
				continue
			}
			field := fmt.Sprintf("spec.tolerations[%d]", i)
			var msg string
			if tol.Key == "" && tol.Operator == corev1.TolerationOpExists {
				msg = fmt.Sprintf("%s: operator Exists without a key tolerates every taint, including %s of NodePool %q, which is not bound to namespace %q; set the key of a bound NodePool's taint",
					field, ft.taint.ToString(), ft.pool, namespace)
			} else {
				msg = fmt.Sprintf("%s: tolerates %s, a taint only NodePool %q carries, which is not bound to namespace %q; remove the toleration",
					field, ft.taint.ToString(), ft.pool, namespace)
			}
			out = append(out, Violation{Field: field, NodePools: []string{ft.pool}, Message: msg})
			break
		}
	}
	return out
}

// Placement returns the violation of a Pod of namespace (bound to bound) that runs on a node of the
// NodePool nodePool when bound does not include it; false when it may run there, when the node belongs
// to no NodePool ("") or when the namespace is not bound.
func Placement(namespace string, bound []string, pod *corev1.Pod, nodePool string) (Violation, bool) {
	if nodePool == "" || Allows(bound, nodePool) {
		return Violation{}, false
	}
	return Violation{Field: "spec.nodeName", NodePools: []string{nodePool}, Message: fmt.Sprintf(
		"spec.nodeName: runs on node %q of NodePool %q, which is not bound to namespace %q (bound: %s); delete the pod so that it is recreated on a bound NodePool",
		pod.Spec.NodeName, nodePool, namespace, poolList(bound))}, true
}

// Taints returns the taints of the nodes of a NodePool: not its startup taints, which Pods need not
// tolerate.
func Taints(np *karpv1.NodePool) []corev1.Taint {
	return karpv1.TaintsToCore(np.Spec.Template.Spec.Taints)
}

// SameTaint reports whether a and b are the same taint (key, value and effect).
func SameTaint(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

// poolTaint is a taint of a NodePool's nodes.
type poolTaint struct {
	pool  string
	taint corev1.Taint
}

// foreignTaints returns the taints that only NodePools not in bound carry, by NodePool name.
func foreignTaints(bound []string, nodePools []karpv1.NodePool) []poolTaint {
	sorted := make([]*karpv1.NodePool, len(nodePools))
	for i := range nodePools {
		sorted[i] = &nodePools[i]
	}
	slices.SortFunc(sorted, func(a, b *karpv1.NodePool) int { return cmp.Compare(a.Name, b.Name) })
	var own []corev1.Taint
	for _, np := range sorted {
		if slices.Contains(bound, np.Name) {
			own = append(own, Taints(np)...)
		}
	}
	var foreign []poolTaint
	for _, np := range sorted {
		if slices.Contains(bound, np.Name) {
			continue
		}
		for _, t := range Taints(np) {
			if !slices.ContainsFunc(own, func(o corev1.Taint) bool { return SameTaint(o, t) }) {
				foreign = append(foreign, poolTaint{pool: np.Name, taint: t})
			}
		}
	}
	return foreign
}

// poolList renders NodePool names for messages: "team-a, team-a-gpu".
func poolList(pools []string) string {
	return strings.Join(pools, ", ")
}
