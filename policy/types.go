// Package policy is Joiner's policy engine: it compiles ProvisioningPolicy Rego (OPA, Rego v1 syntax) and
// evaluates it against NodePools, NodeClaims, node classes and Pods.
//
// It is the single evaluation core behind the admission webhooks, the audit controller and the offline CLI
// (package policy/offline), so everything that decides a verdict lives here: the shape of the Rego input
// (Gatekeeper-compatible input.review and input.parameters), the data.inventory document for cross-object
// rules, matching a review to policies, the builtin sandbox, and the formatting of violation messages.
// It holds plain Go types only and never talks to the Kubernetes API; front ends convert their objects into
// a Review and the ProvisioningPolicy custom resource into a Policy.
package policy

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Action is a policy's enforcement action: what a front end does with its violations.
type Action string

const (
	// ActionDeny rejects the request at admission and makes the offline CLI exit 1. It is the default.
	ActionDeny Action = "Deny"
	// ActionWarn admits the request and returns the violations as admission warnings.
	ActionWarn Action = "Warn"
	// ActionDryRun admits the request silently; violations are only logged and reported by audit.
	ActionDryRun Action = "DryRun"
)

// Operation is the admission operation of a review.
type Operation string

const (
	// OperationCreate is an object creation. Offline checks and audit evaluate objects as CREATE.
	OperationCreate Operation = "CREATE"
	// OperationUpdate is an update; Review.OldObject holds the previous object.
	OperationUpdate Operation = "UPDATE"
	// OperationDelete is a deletion; Review.Object is nil and Review.OldObject holds the deleted object.
	OperationDelete Operation = "DELETE"
)

// Kinds a policy may match (spec.match.kinds). Each value is the object's Kubernetes kind.
const (
	KindNodePool       = "NodePool"
	KindNodeClaim      = "NodeClaim"
	KindEC2NodeClass   = "EC2NodeClass"
	KindLocalNodeClass = "LocalNodeClass"
	KindPod            = "Pod"
)

// MatchableKinds lists the kinds spec.match.kinds accepts, in documentation order.
func MatchableKinds() []string {
	return []string{KindNodePool, KindNodeClaim, KindEC2NodeClass, KindLocalNodeClass, KindPod}
}

// InventoryKind reports whether objects of kind belong in data.inventory: the cluster's NodePools and node
// classes. Front ends use it to decide which objects to pass to Engine.SetInventory.
func InventoryKind(kind string) bool {
	switch kind {
	case KindNodePool, KindEC2NodeClass, KindLocalNodeClass:
		return true
	}
	return false
}

// Match selects the reviews a policy applies to. It mirrors ProvisioningPolicy spec.match.
type Match struct {
	// Kinds lists the object kinds the policy applies to (see MatchableKinds). Empty means every kind.
	Kinds []string
	// Operations lists CREATE, UPDATE and DELETE. Empty means CREATE and UPDATE.
	Operations []string
	// NamespaceSelector selects Pods by the labels of their namespace. It applies to Pods only and is
	// ignored for the cluster-scoped kinds. Nil selects every namespace.
	NamespaceSelector *metav1.LabelSelector
	// WorkloadTemplates makes a policy that matches Pods also match the reviews of the pod templates of
	// workloads (see TemplateReview). False leaves workloads to the Pod-level check.
	WorkloadTemplates bool
}

// Policy is one ProvisioningPolicy as the engine sees it.
type Policy struct {
	// Name is the ProvisioningPolicy's metadata.name; it prefixes every message ("[name] msg").
	Name string
	// Generation is metadata.generation. The engine reuses a compiled policy while Name, Generation and
	// Rego are unchanged.
	Generation int64
	// Rego is the policy source in Rego v1 syntax. It must define the set rule `violation`.
	Rego string
	// EnforcementAction is Deny, Warn or DryRun; empty means Deny.
	EnforcementAction Action
	// Match selects the reviews the policy applies to.
	Match Match
	// Parameters is spec.parameters, visible to the Rego as input.parameters. Nil means an empty object.
	Parameters map[string]any
}

// Action returns the policy's enforcement action with the default (Deny) applied.
func (p Policy) Action() Action {
	if p.EnforcementAction == "" {
		return ActionDeny
	}
	return p.EnforcementAction
}

// GroupVersionKind names the type of the reviewed object, as in an AdmissionRequest's kind field.
type GroupVersionKind struct {
	Group   string
	Version string
	Kind    string
}

// GroupVersion returns "group/version", or just "version" for the core group, like an apiVersion field.
func (g GroupVersionKind) GroupVersion() string {
	if g.Group == "" {
		return g.Version
	}
	return g.Group + "/" + g.Version
}

// UserInfo is the requesting user of an admission request. It mirrors authentication/v1 UserInfo and is
// empty for audit and offline checks.
type UserInfo struct {
	Username string
	UID      string
	Groups   []string
	Extra    map[string][]string
}

// Review is one object to evaluate: an admission request, an object under audit, or a file checked offline.
// Object and OldObject are unstructured objects (the JSON form of the Kubernetes object).
type Review struct {
	// Kind is the type of the object. Policies are matched on Kind.Kind.
	Kind GroupVersionKind
	// Operation is CREATE, UPDATE or DELETE.
	Operation Operation
	// Name and Namespace identify the object; Namespace is empty for cluster-scoped kinds.
	Name      string
	Namespace string
	// Object is the new object; nil for DELETE.
	Object map[string]any
	// OldObject is the existing object for UPDATE and DELETE; nil for CREATE.
	OldObject map[string]any
	// UserInfo is the requesting user; empty outside admission.
	UserInfo UserInfo
	// NamespaceLabels are the labels of the Pod's namespace, used by Match.NamespaceSelector. Only read for Pods.
	NamespaceLabels map[string]string
	// Skip names policies left out of this review even where they match (the audit leaves out the
	// policies whose evaluations keep failing while they back off). Nil evaluates every matching policy.
	Skip map[string]bool
	// Template is set on the review of a workload's pod template (see TemplateReview): only policies with
	// Match.WorkloadTemplates match it, and their violations' fields are paths in the workload.
	Template *TemplateSource
}

// NewReview builds a review of obj (and old, for UPDATE and DELETE) taking the kind, name and namespace from
// the object itself. The offline CLI and the audit controller use it with OperationCreate, so a stored object
// is judged exactly as it would have been when it was created.
func NewReview(op Operation, obj, old map[string]any) (Review, error) {
	src := obj
	if src == nil {
		src = old
	}
	if src == nil {
		return Review{}, errors.New("new review: no object given; pass the object (or the old object for DELETE)")
	}
	apiVersion, _ := src["apiVersion"].(string)
	kind, _ := src["kind"].(string)
	if apiVersion == "" || kind == "" {
		return Review{}, errors.New("new review: object has no apiVersion or kind; set both fields, e.g. apiVersion: karpenter.sh/v1, kind: NodePool")
	}
	gvk := GroupVersionKind{Kind: kind, Version: apiVersion}
	if group, version, ok := strings.Cut(apiVersion, "/"); ok {
		gvk.Group, gvk.Version = group, version
	}
	meta, _ := src["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	return Review{Kind: gvk, Operation: op, Name: name, Namespace: namespace, Object: obj, OldObject: old}, nil
}

func (r *Review) validate() error {
	switch r.Operation {
	case OperationCreate, OperationUpdate, OperationDelete:
	default:
		return fmt.Errorf("review operation %q is not supported; use CREATE, UPDATE or DELETE", r.Operation)
	}
	if r.Kind.Kind == "" {
		return errors.New("review has no kind; set Review.Kind (NewReview takes it from the object)")
	}
	return nil
}

// Violation is one result of evaluating a policy against a review: either an element of the policy's
// `violation` set, or, when Err is set, the failure to evaluate that policy.
type Violation struct {
	// Policy is the name of the policy that produced the violation.
	Policy string `json:"policy"`
	// Action is the policy's enforcement action.
	Action Action `json:"action"`
	// Message is the violation's msg; for an evaluation error, a description of the failure.
	Message string `json:"message"`
	// Field is the optional path of the offending field, such as spec.template.spec.requirements[2].
	Field string `json:"field,omitempty"`
	// Details is the optional details object of the violation.
	Details map[string]any `json:"details,omitempty"`
	// Err is set when the policy could not be evaluated (compile failure, deadline, memory budget, a builtin
	// size bound, malformed violation). A builtin that merely fails (to_number("zero")) is not an error: its
	// expression is undefined. Callers decide whether such a result denies (fail closed) or is only logged.
	Err error `json:"-"`
}

// IsError reports whether v reports an evaluation failure rather than a policy violation.
func (v Violation) IsError() bool { return v.Err != nil }

// String formats v the way every front end shows it: "[policy-name] message (field: path)", without the
// field suffix when Field is empty. Evaluation errors read "[policy-name] policy evaluation failed: cause".
func (v Violation) String() string {
	var b strings.Builder
	b.Grow(len(v.Policy) + len(v.Message) + len(v.Field) + 12)
	b.WriteByte('[')
	b.WriteString(v.Policy)
	b.WriteString("] ")
	b.WriteString(v.Message)
	if v.Field != "" {
		b.WriteString(" (field: ")
		b.WriteString(v.Field)
		b.WriteByte(')')
	}
	return b.String()
}

// Verdict sorts the results of one Evaluate by what a front end does with them, so the webhook, audit and
// CLI apply the enforcement actions the same way.
type Verdict struct {
	// Deny, Warn and DryRun hold the violations of policies with that enforcement action.
	Deny, Warn, DryRun []Violation
	// Errors holds the evaluation failures, whatever the policy's action.
	Errors []Violation
}

// NewVerdict groups results, keeping their order.
func NewVerdict(results []Violation) Verdict {
	var v Verdict
	for _, r := range results {
		switch {
		case r.IsError():
			v.Errors = append(v.Errors, r)
		case r.Action == ActionWarn:
			v.Warn = append(v.Warn, r)
		case r.Action == ActionDryRun:
			v.DryRun = append(v.DryRun, r)
		default:
			v.Deny = append(v.Deny, r)
		}
	}
	return v
}

// Allowed reports whether a request should be admitted: there is no Deny violation and, when failClosed is
// set, no evaluation error from a policy whose action is Deny.
func (v Verdict) Allowed(failClosed bool) bool {
	if len(v.Deny) > 0 {
		return false
	}
	if failClosed {
		for _, e := range v.Errors {
			if e.Action == ActionDeny {
				return false
			}
		}
	}
	return true
}

// Messages formats each violation with Violation.String, one message per element: the lines of a denial
// (joined with "\n") or the admission warnings.
func Messages(vs []Violation) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.String()
	}
	return out
}
