package webhooks

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/joiner-dev/joiner/policy"
)

// Request is an admission request with its objects decoded once: every check of the request (the
// semantic checks, the old object's checks on UPDATE, the policy gate) reads New and Old rather than the
// raw Object and OldObject of the embedded request. New is nil for DELETE and CONNECT unless the
// request carries an object; Old is nil when the request has no old object (CREATE).
type Request struct {
	admission.Request
	New *Object
	Old *Object
}

// NewRequest wraps an admission request; its objects are decoded when a handler first reads them.
func NewRequest(req admission.Request) *Request {
	r := &Request{Request: req}
	if req.Operation == admissionv1.Create || req.Operation == admissionv1.Update || len(req.Object.Raw) > 0 {
		r.New = NewObject(req.Object.Raw)
	}
	if len(req.OldObject.Raw) > 0 {
		r.Old = NewObject(req.OldObject.Raw)
	}
	return r
}

// DecodedHandler is a handler that also takes a request whose objects are already decoded, so that a
// caller holding them (joiner check) does not encode them to JSON for the handler to decode again. Every
// handler of NewHandlers is one; Handle is HandleDecoded of NewRequest.
type DecodedHandler interface {
	admission.Handler
	HandleDecoded(ctx context.Context, req *Request) admission.Response
}

// requestObjects are the decoded new and old objects of a request. Object is nil for DELETE (and for
// CONNECT); Old is nil for CREATE.
type requestObjects struct {
	Object map[string]any
	Old    map[string]any
}

// decode checks that the request is about wantKind and decodes its objects. The error names what is
// wrong with the request.
func (r *Request) decode(wantKind string) (requestObjects, error) {
	var objs requestObjects
	if r.Kind.Kind != wantKind {
		return objs, fmt.Errorf("this webhook handles %s objects but the request is for kind %q; check the webhook configuration's rules", wantKind, r.Kind.Kind)
	}
	switch r.Operation {
	case admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect:
	default:
		return objs, fmt.Errorf("unsupported admission operation %q; expected CREATE, UPDATE, DELETE or CONNECT", r.Operation)
	}
	var err error
	if r.Operation == admissionv1.Create || r.Operation == admissionv1.Update {
		if objs.Object, err = r.New.Content(); err != nil {
			return objs, fmt.Errorf("request object of %s %q: decode JSON: %w", wantKind, r.Name, err)
		}
	}
	if (r.Operation == admissionv1.Update || r.Operation == admissionv1.Delete) && r.Old != nil {
		if objs.Old, err = r.Old.Content(); err != nil {
			return objs, fmt.Errorf("request old object of %s %q: decode JSON: %w", wantKind, r.Name, err)
		}
	}
	if r.Operation == admissionv1.Update && objs.Old == nil {
		return objs, fmt.Errorf("UPDATE request for %s %q has no old object", wantKind, r.Name)
	}
	return objs, nil
}

// reviewOf turns an admission request into a policy review with policy.BuildReview, the builder the
// audit and the offline checks share. It returns false for operations policies cannot match (CONNECT).
func reviewOf(req *Request, objs requestObjects, namespaceLabels map[string]string) (policy.Review, bool) {
	var op policy.Operation
	switch req.Operation {
	case admissionv1.Create:
		op = policy.OperationCreate
	case admissionv1.Update:
		op = policy.OperationUpdate
	case admissionv1.Delete:
		op = policy.OperationDelete
	default:
		return policy.Review{}, false
	}
	var extra map[string][]string
	if len(req.UserInfo.Extra) > 0 {
		extra = make(map[string][]string, len(req.UserInfo.Extra))
		for k, v := range req.UserInfo.Extra {
			extra[k] = append([]string(nil), v...)
		}
	}
	review, err := policy.BuildReview(policy.ReviewInput{
		Operation: op,
		Object:    objs.Object,
		OldObject: objs.Old,
		Kind:      policy.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind},
		Name:      req.Name,
		Namespace: req.Namespace,
		UserInfo: policy.UserInfo{
			Username: req.UserInfo.Username,
			UID:      req.UserInfo.UID,
			Groups:   append([]string(nil), req.UserInfo.Groups...),
			Extra:    extra,
		},
		NamespaceLabels: namespaceLabels,
	})
	// With the kind given, BuildReview cannot fail; Request.decode already checked the objects.
	return review, err == nil
}

// beingDeleted reports whether obj has a deletionTimestamp. Semantic checks are skipped for such objects
// so nothing stands in the way of their finalizers being removed.
func beingDeleted(obj map[string]any) bool {
	meta, ok := childObject(obj, "metadata")
	return ok && !absent(meta, "deletionTimestamp")
}
