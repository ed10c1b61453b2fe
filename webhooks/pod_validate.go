package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// PodTenancyValidator is the validating Pod handler (/validate/pod). For a Pod in a namespace bound to
// NodePools it denies targeting a NodePool the namespace is not bound to (another tenant's):
//   - nodeSelector karpenter.sh/nodepool naming such a NodePool;
//   - a required or preferred node affinity term with `karpenter.sh/nodepool In [...]` naming one;
//   - a toleration of a taint that only such NodePools carry — a toleration with operator Exists and no
//     key tolerates every taint, so it is denied as soon as another NodePool has a taint of its own.
//
// Then it runs the policy engine for kind Pod, with the labels of the Pod's Namespace for the policies'
// namespaceSelector. Pods in exempt namespaces are not looked at.
type PodTenancyValidator struct {
	reader           client.Reader
	gate             *policyGate
	exemptNamespaces map[string]bool
	exemptUsers      map[string]bool
	log              logr.Logger
}

// lookupError marks a failure to read the cluster, which denies (tenancy fails closed) rather than
// reporting a malformed request.
type lookupError struct{ err error }

func (e *lookupError) Error() string { return e.err.Error() }
func (e *lookupError) Unwrap() error { return e.err }

// Handle implements admission.Handler.
func (v *PodTenancyValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	objs, err := decodeRequest(&req, "Pod")
	if err != nil {
		return badRequest(err)
	}
	if req.Namespace == "" || v.exemptNamespaces[req.Namespace] || v.exemptUsers[req.UserInfo.Username] {
		return admission.Allowed("")
	}
	ns, err := readNamespace(ctx, v.reader, req.Namespace)
	if err != nil {
		v.log.Error(err, "pod tenancy check failed", "namespace", req.Namespace, "pod", req.Name)
		return admission.Denied(fmt.Sprintf("could not check NodePool tenancy of the pod: %v; retry", err))
	}
	var f findings
	pools := BoundNodePools(ns)
	if len(pools) > 0 && (req.Operation == admissionv1.Create || req.Operation == admissionv1.Update) {
		nf, err := v.tenancy(ctx, req.Namespace, pools, req.Object.Raw)
		if err != nil {
			return v.failed(&req, err)
		}
		if req.Operation == admissionv1.Update && len(nf.denials) > 0 {
			if of, err := v.tenancy(ctx, req.Namespace, pools, req.OldObject.Raw); err == nil {
				nf = grandfather(nf, of)
			}
		}
		f.add(nf)
	}
	var nsLabels map[string]string
	if ns != nil {
		nsLabels = ns.Labels
	}
	if review, ok := reviewOf(&req, objs, nsLabels); ok {
		f.add(v.gate.evaluate(ctx, review))
	}
	return respond(f)
}

func (v *PodTenancyValidator) failed(req *admission.Request, err error) admission.Response {
	if _, ok := errors.AsType[*lookupError](err); ok {
		v.log.Error(err, "pod tenancy check failed", "namespace", req.Namespace, "pod", req.Name)
		return admission.Denied(fmt.Sprintf("could not check NodePool tenancy of the pod: %v; retry", err))
	}
	return badRequest(err)
}

// tenancy checks one raw Pod against the NodePools its namespace is bound to.
func (v *PodTenancyValidator) tenancy(ctx context.Context, namespace string, pools []string, raw []byte) (findings, error) {
	var f findings
	var pod corev1.Pod
	if err := json.Unmarshal(raw, &pod); err != nil {
		return f, fmt.Errorf("decode pod in namespace %q: %w", namespace, err)
	}
	unbound := func(values []string) []string {
		var out []string
		for _, p := range values {
			if !slices.Contains(pools, p) && !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
		return out
	}
	notBound := func(field string, names []string) string {
		return fmt.Sprintf("%s: NodePool %s is not bound to namespace %q (bound: %s); use only the bound NodePools",
			field, strings.Join(names, ", "), namespace, poolList(pools))
	}

	if name, ok := pod.Spec.NodeSelector[karpv1.NodePoolLabelKey]; ok {
		if names := unbound([]string{name}); len(names) > 0 {
			f.deny(notBound(fmt.Sprintf("spec.nodeSelector[%s]", karpv1.NodePoolLabelKey), names))
		}
	}
	if na := nodeAffinityOf(&pod); na != nil {
		if req := na.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			for i, term := range req.NodeSelectorTerms {
				for j, e := range term.MatchExpressions {
					if e.Key == karpv1.NodePoolLabelKey && e.Operator == corev1.NodeSelectorOpIn {
						if names := unbound(e.Values); len(names) > 0 {
							f.deny(notBound(fmt.Sprintf("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[%d].matchExpressions[%d]", i, j), names))
						}
					}
				}
			}
		}
		for i, pref := range na.PreferredDuringSchedulingIgnoredDuringExecution {
			for j, e := range pref.Preference.MatchExpressions {
				if e.Key == karpv1.NodePoolLabelKey && e.Operator == corev1.NodeSelectorOpIn {
					if names := unbound(e.Values); len(names) > 0 {
						f.deny(notBound(fmt.Sprintf("spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[%d].preference.matchExpressions[%d]", i, j), names))
					}
				}
			}
		}
	}
	if len(pod.Spec.Tolerations) == 0 {
		return f, nil
	}
	foreign, err := v.foreignTaints(ctx, pools)
	if err != nil {
		return f, err
	}
	for i, tol := range pod.Spec.Tolerations {
		for _, ft := range foreign {
			if !tol.ToleratesTaint(logr.Discard(), &ft.taint, true) {
				continue
			}
			if tol.Key == "" && tol.Operator == corev1.TolerationOpExists {
				f.deny(fmt.Sprintf("spec.tolerations[%d]: operator Exists without a key tolerates every taint, including %s of NodePool %q, which is not bound to namespace %q; set the key of a bound NodePool's taint",
					i, ft.taint.ToString(), ft.pool, namespace))
			} else {
				f.deny(fmt.Sprintf("spec.tolerations[%d]: tolerates %s, a taint only NodePool %q carries, which is not bound to namespace %q; remove the toleration",
					i, ft.taint.ToString(), ft.pool, namespace))
			}
			break
		}
	}
	return f, nil
}

// foreignTaints returns the taints that only NodePools not bound to the namespace carry.
func (v *PodTenancyValidator) foreignTaints(ctx context.Context, pools []string) ([]poolTaint, error) {
	var list karpv1.NodePoolList
	if err := v.reader.List(ctx, &list); err != nil {
		return nil, &lookupError{fmt.Errorf("list NodePools: %w", err)}
	}
	slices.SortFunc(list.Items, func(a, b karpv1.NodePool) int { return strings.Compare(a.Name, b.Name) })
	var own []corev1.Taint
	for i := range list.Items {
		if slices.Contains(pools, list.Items[i].Name) {
			own = append(own, nodePoolTaints(&list.Items[i])...)
		}
	}
	var foreign []poolTaint
	for i := range list.Items {
		np := &list.Items[i]
		if slices.Contains(pools, np.Name) {
			continue
		}
		for _, t := range nodePoolTaints(np) {
			if !slices.ContainsFunc(own, func(o corev1.Taint) bool { return sameTaint(o, t) }) {
				foreign = append(foreign, poolTaint{pool: np.Name, taint: t})
			}
		}
	}
	return foreign, nil
}

func nodeAffinityOf(pod *corev1.Pod) *corev1.NodeAffinity {
	if pod.Spec.Affinity == nil {
		return nil
	}
	return pod.Spec.Affinity.NodeAffinity
}
