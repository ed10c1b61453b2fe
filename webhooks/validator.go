package webhooks

import (
	"context"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// semanticCheck checks one object of a request (its object, or its old object on UPDATE) and returns its
// findings. An error means the object could not be read and rejects the request.
type semanticCheck func(ctx context.Context, req *Request, obj *Object) (findings, error)

// Validator is the validating handler of one cluster-scoped kind: the kind's semantic checks, then the
// policy engine. Semantic problems and Deny policy violations are combined into one denial, one line
// each; warnings of both ride along.
type Validator struct {
	kind   string
	check  semanticCheck
	gate   *policyGate
	exempt map[string]bool
}

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	return v.HandleDecoded(ctx, NewRequest(req))
}

// HandleDecoded implements DecodedHandler.
func (v *Validator) HandleDecoded(ctx context.Context, req *Request) admission.Response {
	objs, err := req.decode(v.kind)
	if err != nil {
		return badRequest(err)
	}
	if v.exempt[req.UserInfo.Username] {
		return admission.Allowed("requests of Joiner's own service account are not validated")
	}
	var f findings
	checked := req.Operation == admissionv1.Create || req.Operation == admissionv1.Update
	if v.check != nil && checked && !beingDeleted(objs.Object) {
		nf, err := v.check(ctx, req, req.New)
		if err != nil {
			return badRequest(err)
		}
		if req.Operation == admissionv1.Update && len(nf.denials) > 0 {
			// Only pay for checking the old object when there is something to forgive.
			if of, err := v.check(ctx, req, req.Old); err == nil {
				nf = grandfather(nf, of)
			}
		}
		f.add(nf)
	}
	if review, ok := reviewOf(req, objs, nil); ok {
		f.add(v.gate.evaluate(ctx, review))
	}
	return respond(f)
}
