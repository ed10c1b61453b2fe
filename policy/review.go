package policy

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
)

// ReviewInput is what a front end knows about one object under review. The admission webhook fills every
// field from the AdmissionRequest; the audit and the offline checks give the operation, the objects and,
// for Pods, the labels of their namespace.
type ReviewInput struct {
	// Operation is CREATE, UPDATE or DELETE.
	Operation Operation
	// Object is the new object (nil for DELETE) and OldObject the existing one (nil for CREATE), in their
	// unstructured JSON form. BuildReview does not modify them.
	Object, OldObject map[string]any
	// Kind is the type of the object. Empty means the object's own apiVersion and kind.
	Kind GroupVersionKind
	// Name and Namespace identify the object. Empty means the object's own metadata; a name that is still
	// empty becomes metadata.generateName (an object created with generateName has no name yet at
	// admission).
	Name, Namespace string
	// UserInfo is the requesting user; empty outside admission.
	UserInfo UserInfo
	// NamespaceLabels are the labels of the namespace of a Pod, for the policies' namespaceSelector.
	NamespaceLabels map[string]string
}

// BuildReview is the one way the webhook, the audit and the offline checks turn an object into a Review,
// so a policy sees the same input.review wherever it runs. Besides filling in what the input leaves empty
// from the object, it leaves metadata.managedFields out of both objects: the apiserver adds them before
// admission, stored objects carry them, manifests do not, and no verdict may depend on which of those a
// policy was shown.
func BuildReview(in ReviewInput) (Review, error) {
	obj, old := withoutManagedFields(in.Object), withoutManagedFields(in.OldObject)
	var r Review
	if in.Kind.Kind == "" {
		var err error
		if r, err = NewReview(in.Operation, obj, old); err != nil {
			return Review{}, err // already "new review: ...", with the fix
		}
	} else {
		r = Review{Kind: in.Kind, Operation: in.Operation, Object: obj, OldObject: old}
		r.Name, r.Namespace = metadataString(obj, old, "name"), metadataString(obj, old, "namespace")
	}
	if in.Name != "" {
		r.Name = in.Name
	}
	if r.Name == "" {
		r.Name = metadataString(obj, old, "generateName")
	}
	if in.Namespace != "" {
		r.Namespace = in.Namespace
	}
	r.UserInfo, r.NamespaceLabels = in.UserInfo, in.NamespaceLabels
	return r, nil
}

// metadataString returns the string metadata field key of obj, or of old when obj is nil.
func metadataString(obj, old map[string]any, key string) string {
	if obj == nil {
		obj = old
	}
	meta, _ := obj["metadata"].(map[string]any)
	s, _ := meta[key].(string)
	return s
}

// withoutManagedFields returns obj, or a copy sharing everything but the metadata map when that holds
// managedFields; obj itself is never modified. Reviews and the inventory both drop managedFields, which
// no policy should read and which can be larger than the rest of the object.
func withoutManagedFields(obj map[string]any) map[string]any {
	meta, ok := obj["metadata"].(map[string]any)
	if !ok {
		return obj
	}
	if _, has := meta["managedFields"]; !has {
		return obj
	}
	out := maps.Clone(obj)
	meta = maps.Clone(meta)
	delete(meta, "managedFields")
	out["metadata"] = meta
	return out
}

// Decide evaluates the policies that match r and sorts their results into a Verdict. It is the one
// decision function of the webhook, the audit and the offline checks; what each does with a Verdict
// follows from Denials, Warnings and Recorded. A workload (Deployment, StatefulSet, DaemonSet, ReplicaSet,
// Job, CronJob) is judged by the Pod its template describes, with the policies that opted into workload
// templates (TemplateReview), so every front end judges workloads alike. The error is Evaluate's: the
// review itself could not be evaluated, or a workload's template is not an object.
func (e *Engine) Decide(ctx context.Context, r Review) (Verdict, error) {
	tr, isWorkload, err := TemplateReview(r)
	if err != nil {
		return Verdict{}, fmt.Errorf("decide %s %q: %w", r.Kind.Kind, r.Name, err)
	}
	if isWorkload {
		r = tr
	}
	vs, err := e.Evaluate(ctx, r)
	if err != nil {
		return Verdict{}, err
	}
	return NewVerdict(vs), nil
}

// Denials returns what rejects a request, in evaluation order (by policy name): every Deny violation and
// the evaluation failure of every policy whose action is neither Warn nor DryRun, since a Deny policy that
// cannot be evaluated fails closed.
func (v Verdict) Denials() []Violation {
	return v.withFailures(v.Deny, func(a Action) bool { return a != ActionWarn && a != ActionDryRun })
}

// Warnings returns what is shown to the requester without rejecting: the Warn violations and the
// evaluation failures of Warn policies, in evaluation order.
func (v Verdict) Warnings() []Violation {
	return v.withFailures(v.Warn, func(a Action) bool { return a == ActionWarn })
}

// Recorded returns what is only logged and reported by the audit: the DryRun violations and the
// evaluation failures of DryRun policies, in evaluation order.
func (v Verdict) Recorded() []Violation {
	return v.withFailures(v.DryRun, func(a Action) bool { return a == ActionDryRun })
}

// All returns every result, violations and evaluation failures, in evaluation order.
func (v Verdict) All() []Violation {
	return byPolicy(slices.Concat(v.Deny, v.Warn, v.DryRun, v.Errors))
}

// withFailures adds to violations the evaluation failures of the policies whose action is selected, in
// evaluation order.
func (v Verdict) withFailures(violations []Violation, selected func(Action) bool) []Violation {
	out := slices.Clone(violations)
	for _, e := range v.Errors {
		if selected(e.Action) {
			out = append(out, e)
		}
	}
	return byPolicy(out)
}

// byPolicy restores evaluation order: Evaluate returns results by policy name, and a policy yields either
// violations or one failure, so a stable sort by policy name puts a merged list back in that order.
func byPolicy(vs []Violation) []Violation {
	slices.SortStableFunc(vs, func(a, b Violation) int { return cmp.Compare(a.Policy, b.Policy) })
	return vs
}
