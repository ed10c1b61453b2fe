package webhooks

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/tenancy"
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
	return v.HandleDecoded(ctx, NewRequest(req))
}

// HandleDecoded implements DecodedHandler.
func (v *PodTenancyValidator) HandleDecoded(ctx context.Context, req *Request) admission.Response {
	objs, err := req.decode("Pod")
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
		nf, err := v.tenancy(ctx, req.Namespace, pools, req.New)
		if err != nil {
			return v.failed(req, err)
		}
		if req.Operation == admissionv1.Update && len(nf.denials) > 0 {
			if of, err := v.tenancy(ctx, req.Namespace, pools, req.Old); err == nil {
				nf = grandfather(nf, of)
			}
		}
		f.add(nf)
	}
	var nsLabels map[string]string
	if ns != nil {
		nsLabels = ns.Labels
	}
	if review, ok := reviewOf(req, objs, nsLabels); ok {
		f.add(v.gate.evaluate(ctx, review))
	}
	return respond(f)
}

func (v *PodTenancyValidator) failed(req *Request, err error) admission.Response {
	if _, ok := errors.AsType[*lookupError](err); ok {
		v.log.Error(err, "pod tenancy check failed", "namespace", req.Namespace, "pod", req.Name)
		return admission.Denied(fmt.Sprintf("could not check NodePool tenancy of the pod: %v; retry", err))
	}
	return badRequest(err)
}

// tenancy checks one Pod of the request against the NodePools its namespace is bound to, with the rule of package
// tenancy. The NodePools are listed only when the Pod has tolerations to judge.
func (v *PodTenancyValidator) tenancy(ctx context.Context, namespace string, pools []string, obj *Object) (findings, error) {
	var f findings
	pod, err := typedView[corev1.Pod](obj)
	if err != nil {
		return f, fmt.Errorf("decode pod in namespace %q: %w", namespace, err)
	}
	violations, err := v.podTenancy(ctx, namespace, pools, pod)
	if err != nil {
		return f, err
	}
	for _, violation := range violations {
		f.deny(violation.Message)
	}
	return f, nil
}

// podTenancy returns the violations of the binding of namespace (bound to pools) by pod, a Pod or the Pod
// of a workload's template. The NodePools are listed only when the Pod has tolerations to judge.
func (v *PodTenancyValidator) podTenancy(ctx context.Context, namespace string, pools []string, pod *corev1.Pod) ([]tenancy.Violation, error) {
	violations := tenancy.Selection(namespace, pools, pod)
	if len(pod.Spec.Tolerations) > 0 {
		var list karpv1.NodePoolList
		if err := v.reader.List(ctx, &list); err != nil {
			return nil, &lookupError{fmt.Errorf("list NodePools: %w", err)}
		}
		violations = append(violations, tenancy.Tolerations(namespace, pools, pod, list.Items)...)
	}
	return violations, nil
}
