package webhooks

import (
	"context"
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/joiner-dev/joiner/policy"
)

// WorkloadValidator is the validating handler of workloads (/validate/workload): Deployments,
// StatefulSets, DaemonSets, ReplicaSets and Jobs (their spec.template) and CronJobs (their
// spec.jobTemplate.spec.template). It judges the Pod the template describes as the Pod validator would
// judge that Pod, so a workload whose Pods would be denied is rejected at once:
//   - tenancy, always, for a workload in a namespace bound to NodePools;
//   - the Pod ProvisioningPolicies that opt in with spec.match.workloadTemplates.
//
// Each message carries the path of the offending field in the workload, such as
// spec.template.spec.nodeSelector[karpenter.sh/nodepool]. On UPDATE, what the old template already broke
// is only a warning, so the controllers that update workloads (scaling a ReplicaSet) are never blocked by
// a policy added after the workload. The Pod validator stays as the backstop for Pods made otherwise.
type WorkloadValidator struct {
	pods *PodTenancyValidator
}

// Handle implements admission.Handler.
func (v *WorkloadValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	return v.HandleDecoded(ctx, NewRequest(req))
}

// HandleDecoded implements DecodedHandler.
func (v *WorkloadValidator) HandleDecoded(ctx context.Context, req *Request) admission.Response {
	if group, ok := policy.WorkloadGroup(req.Kind.Kind); !ok || group != req.Kind.Group {
		return badRequest(fmt.Errorf("this webhook handles the workloads apps/v1 Deployment, StatefulSet, DaemonSet, ReplicaSet and batch/v1 Job, CronJob but the request is for %s %s; check the webhook configuration's rules",
			req.Kind.Group, req.Kind.Kind))
	}
	objs, err := req.decode(req.Kind.Kind)
	if err != nil {
		return badRequest(err)
	}
	p := v.pods
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if req.Namespace == "" || p.exemptNamespaces[req.Namespace] || p.exemptUsers[req.UserInfo.Username] || beingDeleted(objs.Object) {
		return admission.Allowed("")
	}
	ns, err := readNamespace(ctx, p.reader, req.Namespace)
	if err != nil {
		p.log.Error(err, "workload tenancy check failed", "namespace", req.Namespace, "kind", req.Kind.Kind, "name", req.Name)
		return admission.Denied(fmt.Sprintf("could not check NodePool tenancy of the %s's pod template: %v; retry", req.Kind.Kind, err))
	}
	var nsLabels map[string]string
	if ns != nil {
		nsLabels = ns.Labels
	}
	review, ok := reviewOf(req, objs, nsLabels)
	if !ok {
		return admission.Allowed("")
	}
	tr, ok, err := policy.TemplateReview(review)
	if err != nil {
		return badRequest(fmt.Errorf("%s %q: %w", req.Kind.Kind, req.Name, err))
	}
	if !ok || tr.Object == nil {
		return admission.Allowed("")
	}
	f, err := v.judge(ctx, tr, BoundNodePools(ns), true)
	if err != nil {
		return p.failed(req, err)
	}
	if req.Operation == admissionv1.Update && len(f.denials) > 0 && tr.OldObject != nil {
		old := tr
		old.Object, old.OldObject, old.Operation = tr.OldObject, nil, policy.OperationCreate
		if of, err := v.judge(ctx, old, BoundNodePools(ns), false); err == nil {
			f = grandfather(f, of)
		}
	}
	return respond(f)
}

// judge returns what tenancy (when pools is not empty) and the opted-in Pod policies say about the Pod of
// a template review. record is false for the old template of an UPDATE, which is judged only to find
// what it already broke: its policy results are neither counted nor passed to the dry-run hook.
func (v *WorkloadValidator) judge(ctx context.Context, tr policy.Review, pools []string, record bool) (findings, error) {
	var f findings
	if len(pools) > 0 {
		pod, err := podOf(tr.Object)
		if err != nil {
			return f, fmt.Errorf("%s of %s %q: %w", tr.Template.Path, tr.Template.Kind.Kind, tr.Name, err)
		}
		violations, err := v.pods.podTenancy(ctx, tr.Namespace, pools, pod)
		if err != nil {
			return f, err
		}
		for _, violation := range violations {
			// A tenancy message begins with the field, a path in the Pod; make it a path in the workload.
			f.deny(tr.Template.FieldPath(violation.Message))
		}
	}
	if record {
		f.add(v.pods.gate.evaluate(ctx, tr))
		return f, nil
	}
	if v.pods.gate.engine == nil {
		return f, nil
	}
	verdict, err := v.pods.gate.engine.Decide(ctx, tr)
	if err != nil {
		return f, fmt.Errorf("evaluate the old pod template: %w", err)
	}
	for _, d := range verdict.Denials() {
		f.deny(d.String())
	}
	return f, nil
}

// podOf decodes the Pod of a template review into its typed form.
func podOf(obj map[string]any) (*corev1.Pod, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode the pod template: %w", err)
	}
	pod := &corev1.Pod{}
	if err := json.Unmarshal(raw, pod); err != nil {
		return nil, fmt.Errorf("decode the pod template: %w", err)
	}
	return pod, nil
}
