package provisioning

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/state"
	"github.com/joiner-dev/joiner/tenancy"
)

// withTenancy returns the pending pods to simulate, honouring NodePool tenancy (package tenancy, the
// rule the Pod webhooks enforce at admission): a pod of a namespace bound to NodePools is replaced by a
// copy that also requires karpenter.sh/nodepool NotIn [every other NodePool the state knows], so the
// simulation never places it on another tenant's NodePool, new node or existing, and may still place it
// on its own. A pod whose spec selects or tolerates another tenant's NodePool gets an Event saying why.
// The pods of a namespace that cannot be read are left out of this round: tenancy fails closed.
func (p *Provisioner) withTenancy(ctx context.Context, pods []*corev1.Pod, s *state.ClusterState) []*corev1.Pod {
	known := nodePoolNames(s)
	bindings := map[string][]string{}
	unreadable := map[string]bool{}
	out := make([]*corev1.Pod, 0, len(pods))
	for _, pod := range pods {
		ns := pod.Namespace
		bound, read := bindings[ns]
		if !read && !unreadable[ns] {
			var err error
			if bound, err = p.boundNodePools(ctx, ns); err != nil {
				p.Log.Error(err, "pods of the namespace are not provisioned this round: their NodePool tenancy is unknown", "namespace", ns)
				unreadable[ns] = true
			} else {
				bindings[ns] = bound
			}
		}
		if unreadable[ns] {
			continue
		}
		forbidden := tenancy.Unbound(bound, known)
		if len(forbidden) == 0 {
			out = append(out, pod)
			continue
		}
		if violations := tenancy.Check(ns, bound, pod, s.NodePools); len(violations) > 0 {
			p.reportTenancy(pod, bound, violations)
		}
		out = append(out, excludeNodePools(pod, forbidden))
	}
	return out
}

// boundNodePools returns the NodePools the namespace is bound to; none when it does not exist.
func (p *Provisioner) boundNodePools(ctx context.Context, namespace string) ([]string, error) {
	ns := &corev1.Namespace{}
	if err := p.Client.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read namespace %q for NodePool tenancy: %w", namespace, err)
	}
	return tenancy.BoundNodePools(ns), nil
}

// reportTenancy logs and records, on the pod (reason tenancy.ReasonViolation), how its own spec
// reaches for NodePools its namespace is not bound to, which the Pod webhooks, failing open, may not
// have denied.
func (p *Provisioner) reportTenancy(pod *corev1.Pod, bound []string, violations []tenancy.Violation) {
	var reached, messages []string
	for _, v := range violations {
		messages = append(messages, v.Message)
		for _, name := range v.NodePools {
			if !slices.Contains(reached, name) {
				reached = append(reached, name)
			}
		}
	}
	p.Log.Info("pending pod breaks NodePool tenancy; no capacity is launched for it outside its namespace's NodePools",
		"pod", client.ObjectKeyFromObject(pod).String(), "bound", bound, "nodePools", reached)
	p.event(pod, corev1.EventTypeWarning, tenancy.ReasonViolation,
		"no capacity is launched for this pod in NodePool %s: namespace %q is bound to %s only: %s",
		strings.Join(reached, ", "), pod.Namespace, strings.Join(bound, ", "), strings.Join(messages, "; "))
}

// nodePoolNames returns, sorted, the name of every NodePool the state knows of: the NodePools, and
// the karpenter.sh/nodepool label of every Node and NodeClaim (a NodePool may be gone while its
// nodes are not).
func nodePoolNames(s *state.ClusterState) []string {
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

// excludeNodePools returns a copy of pod that also requires karpenter.sh/nodepool NotIn names: added to
// every required node affinity term (terms are ORed, so each must carry it), or as the only term when
// the pod has none. Terms without match expressions match no node, so they are left alone, as is a
// required node affinity without terms (it matches no node either).
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
		if len(terms[i].MatchExpressions) > 0 {
			terms[i].MatchExpressions = append(terms[i].MatchExpressions, expr)
		}
	}
	return out
}
