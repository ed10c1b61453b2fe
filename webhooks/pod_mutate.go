package webhooks

import (
	"context"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// PodTenancyMutator is the mutating Pod handler (/mutate/pod). For a Pod created in a namespace bound to
// NodePools (see NodePoolsAnnotation) it:
//   - pins the Pod to its NodePool with the nodeSelector karpenter.sh/nodepool: <pool> when the namespace
//     is bound to one NodePool, or with a required node affinity karpenter.sh/nodepool In [pools] when it
//     is bound to several — added to every nodeSelectorTerm (terms are ORed, so each must carry it);
//   - adds a toleration for every taint of its NodePools that the Pod does not tolerate yet.
//
// It leaves alone what the Pod already says about karpenter.sh/nodepool (the validator judges it), Pods
// in exempt namespaces and unbound namespaces, and updates (a Pod's scheduling constraints are immutable).
// Applying it twice yields no second patch.
type PodTenancyMutator struct {
	reader           client.Reader
	exemptNamespaces map[string]bool
	log              logr.Logger
}

// Handle implements admission.Handler.
func (m *PodTenancyMutator) Handle(ctx context.Context, req admission.Request) admission.Response {
	return m.HandleDecoded(ctx, NewRequest(req))
}

// HandleDecoded implements DecodedHandler. It patches a copy of the decoded Pod.
func (m *PodTenancyMutator) HandleDecoded(ctx context.Context, req *Request) admission.Response {
	if req.Kind.Kind != "Pod" {
		return badRequest(fmt.Errorf("this webhook mutates Pods but the request is for kind %q; check the webhook configuration's rules", req.Kind.Kind))
	}
	if req.Operation != admissionv1.Create || req.Namespace == "" || m.exemptNamespaces[req.Namespace] {
		return admission.Allowed("")
	}
	content, err := req.New.Content()
	if err != nil {
		return badRequest(fmt.Errorf("pod %s/%s: decode JSON: %w", req.Namespace, req.Name, err))
	}
	pod, err := typedView[corev1.Pod](req.New)
	if err != nil {
		return badRequest(fmt.Errorf("decode pod %s/%s: %w", req.Namespace, req.Name, err))
	}
	ns, err := readNamespace(ctx, m.reader, req.Namespace)
	if err != nil {
		// Fail open here; the validating webhook denies when it cannot read the namespace either.
		m.log.Error(err, "NodePool tenancy not applied", "namespace", req.Namespace, "pod", req.Name)
		return admission.Allowed("").WithWarnings(clampWarnings([]string{fmt.Sprintf("NodePool tenancy not applied: %v", err)})...)
	}
	pools := BoundNodePools(ns)
	if _, ok := childObject(content, "spec"); len(pools) == 0 || !ok {
		return admission.Allowed("")
	}
	obj := runtime.DeepCopyJSON(content)
	spec, _ := childObject(obj, "spec")

	changed := false
	if len(pools) == 1 {
		changed = pinNodeSelector(spec, pools[0])
	} else if _, pinned := pod.Spec.NodeSelector[karpv1.NodePoolLabelKey]; !pinned {
		changed = pinNodeAffinity(spec, pools)
	}
	taints, warnings := m.boundTaints(ctx, req.Namespace, pools)
	changed = addTolerations(spec, pod.Spec.Tolerations, taints) || changed
	warnings = clampWarnings(warnings)
	if !changed {
		return admission.Allowed("").WithWarnings(warnings...)
	}
	return patchResponse(req.New, obj, func(err error) error {
		return fmt.Errorf("pod %s/%s: encode mutated pod: %w", req.Namespace, req.Name, err)
	}).WithWarnings(warnings...)
}

// boundTaints returns the taints of the bound NodePools, without duplicates, with a warning for each
// NodePool that cannot be read.
func (m *PodTenancyMutator) boundTaints(ctx context.Context, namespace string, pools []string) ([]corev1.Taint, []string) {
	var taints []corev1.Taint
	var warnings []string
	for _, name := range pools {
		np := &karpv1.NodePool{}
		err := m.reader.Get(ctx, client.ObjectKey{Name: name}, np)
		switch {
		case apierrors.IsNotFound(err):
			warnings = append(warnings, fmt.Sprintf("NodePool %q bound to namespace %q does not exist; create it or fix annotation %s", name, namespace, NodePoolsAnnotation))
			continue
		case err != nil:
			m.log.Error(err, "read bound NodePool", "nodepool", name, "namespace", namespace)
			warnings = append(warnings, fmt.Sprintf("no tolerations added for NodePool %q: %v", name, err))
			continue
		}
		for _, t := range nodePoolTaints(np) {
			if !slices.ContainsFunc(taints, func(o corev1.Taint) bool { return sameTaint(o, t) }) {
				taints = append(taints, t)
			}
		}
	}
	return taints, warnings
}

// pinNodeSelector sets nodeSelector karpenter.sh/nodepool to pool unless the Pod already selects a
// NodePool.
func pinNodeSelector(spec map[string]any, pool string) bool {
	selector, ok := ensureObject(spec, "nodeSelector")
	if !ok {
		return false
	}
	if _, has := selector[karpv1.NodePoolLabelKey]; has {
		return false
	}
	selector[karpv1.NodePoolLabelKey] = pool
	return true
}

// pinNodeAffinity adds `karpenter.sh/nodepool In [pools]` to every required nodeSelectorTerm that does not
// already restrict the Pod to some of pools, creating the required affinity when there is none.
func pinNodeAffinity(spec map[string]any, pools []string) bool {
	affinity, ok := childObjectOrNew(spec, "affinity")
	if !ok {
		return false
	}
	nodeAffinity, ok := childObjectOrNew(affinity, "nodeAffinity")
	if !ok {
		return false
	}
	required, ok := childObjectOrNew(nodeAffinity, "requiredDuringSchedulingIgnoredDuringExecution")
	if !ok {
		return false
	}
	expression := func() map[string]any {
		values := make([]any, len(pools))
		for i, p := range pools {
			values[i] = p
		}
		return map[string]any{"key": karpv1.NodePoolLabelKey, "operator": string(corev1.NodeSelectorOpIn), "values": values}
	}
	terms, isList := required["nodeSelectorTerms"].([]any)
	if !absent(required, "nodeSelectorTerms") && !isList {
		return false
	}
	if len(terms) == 0 {
		required["nodeSelectorTerms"] = []any{map[string]any{"matchExpressions": []any{expression()}}}
		commit(spec, "affinity", affinity)
		commit(affinity, "nodeAffinity", nodeAffinity)
		commit(nodeAffinity, "requiredDuringSchedulingIgnoredDuringExecution", required)
		return true
	}
	changed := false
	for _, t := range terms {
		term, ok := t.(map[string]any)
		if !ok || term == nil || termPinned(term, pools) {
			continue
		}
		exprs, isList := term["matchExpressions"].([]any)
		if !absent(term, "matchExpressions") && !isList {
			continue
		}
		term["matchExpressions"] = append(exprs, expression())
		changed = true
	}
	return changed
}

// childObjectOrNew returns m[key] when it is an object, or a new detached object when the key is absent;
// commit attaches a new object once something was written to it, so that a failed attempt leaves no empty
// objects behind. It returns false when m[key] holds another type.
func childObjectOrNew(m map[string]any, key string) (map[string]any, bool) {
	if absent(m, key) {
		return map[string]any{}, true
	}
	return childObject(m, key)
}

func commit(m map[string]any, key string, child map[string]any) {
	if absent(m, key) {
		m[key] = child
	}
}

// termPinned reports whether a nodeSelectorTerm has `karpenter.sh/nodepool In [...]` with only names from
// pools.
func termPinned(term map[string]any, pools []string) bool {
	exprs, _ := term["matchExpressions"].([]any)
	for _, e := range exprs {
		expr, ok := e.(map[string]any)
		if !ok || stringAt(expr, "key") != karpv1.NodePoolLabelKey || stringAt(expr, "operator") != string(corev1.NodeSelectorOpIn) {
			continue
		}
		values, _ := expr["values"].([]any)
		if len(values) == 0 {
			continue
		}
		all := true
		for _, v := range values {
			s, ok := v.(string)
			if !ok || !slices.Contains(pools, s) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// addTolerations appends a toleration for each taint that neither the Pod's tolerations nor an added one
// tolerates. Comparison operators (Lt, Gt) are not relied on, since the cluster may not enable them.
func addTolerations(spec map[string]any, existing []corev1.Toleration, taints []corev1.Taint) bool {
	if len(taints) == 0 {
		return false
	}
	list, isList := spec["tolerations"].([]any)
	if !absent(spec, "tolerations") && !isList {
		return false
	}
	have := slices.Clone(existing)
	changed := false
	for _, taint := range taints {
		tolerated := slices.ContainsFunc(have, func(t corev1.Toleration) bool {
			return t.ToleratesTaint(logr.Discard(), &taint, false)
		})
		if tolerated {
			continue
		}
		list = append(list, tolerationMap(taint))
		have = append(have, corev1.Toleration{Key: taint.Key, Operator: corev1.TolerationOpEqual, Value: taint.Value, Effect: taint.Effect})
		changed = true
	}
	if changed {
		spec["tolerations"] = list
	}
	return changed
}
