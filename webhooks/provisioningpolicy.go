package webhooks

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/policyobject"
)

// ProvisioningPolicyValidator is the validating handler of ProvisioningPolicies
// (/validate/provisioningpolicy). It converts the object with policyobject.ToPolicy and compiles it with
// policy.Validate exactly as the engine will, and denies with the engine's message, which names the field
// and, for Rego errors, the line and column (spec.rego:LINE:COL).
type ProvisioningPolicyValidator struct {
	exempt map[string]bool
}

// NewProvisioningPolicyValidator returns the ProvisioningPolicy validator. Requests by the usernames in
// exemptUsernames are admitted unchecked.
func NewProvisioningPolicyValidator(exemptUsernames []string) *ProvisioningPolicyValidator {
	return &ProvisioningPolicyValidator{exempt: stringSet(exemptUsernames)}
}

// Handle implements admission.Handler.
func (v *ProvisioningPolicyValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	return v.HandleDecoded(ctx, NewRequest(req))
}

// HandleDecoded implements DecodedHandler.
func (v *ProvisioningPolicyValidator) HandleDecoded(_ context.Context, req *Request) admission.Response {
	objs, err := req.decode("ProvisioningPolicy")
	if err != nil {
		return badRequest(err)
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if v.exempt[req.UserInfo.Username] {
		return admission.Allowed("requests of Joiner's own service account are not validated")
	}
	if beingDeleted(objs.Object) {
		return admission.Allowed("")
	}
	problem, err := provisioningPolicyProblem(req.New)
	if err != nil {
		return badRequest(fmt.Errorf("ProvisioningPolicy %q: %w", req.Name, err))
	}
	if problem == "" {
		return admission.Allowed("")
	}
	if req.Operation == admissionv1.Update {
		if oldProblem, err := provisioningPolicyProblem(req.Old); err == nil && oldProblem == problem {
			// The stored policy is already broken in the same way (it was admitted while the webhook
			// was unavailable): let unrelated updates through and say so.
			return respond(findings{warnings: []string{"pre-existing: " + problem}})
		}
	}
	return admission.Denied(problem)
}

// provisioningPolicyProblem returns why the ProvisioningPolicy would not compile, or "".
func provisioningPolicyProblem(obj *Object) (string, error) {
	pp, err := typedView[v1alpha1.ProvisioningPolicy](obj)
	if err != nil {
		return "", fmt.Errorf("decode: %w", err)
	}
	p, err := policyobject.ToPolicy(pp)
	if err != nil {
		return err.Error(), nil
	}
	if err := policy.Validate(p); err != nil {
		return err.Error(), nil
	}
	return "", nil
}
