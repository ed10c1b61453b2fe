package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Default values the defaulting handlers set. They repeat the CRDs' `default:` markers so an object is
// complete even when it was created through a path that skipped schema defaulting or against an older
// CRD. The few defaults beyond the schema are documented on the defaulting functions.
const (
	// DefaultConsolidationPolicy is spec.disruption.consolidationPolicy of a NodePool (schema default).
	DefaultConsolidationPolicy = string(karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized)
	// DefaultConsolidateAfter is spec.disruption.consolidateAfter of a NodePool (schema default): nodes
	// are consolidated as soon as they are eligible.
	DefaultConsolidateAfter = "0s"
	// DefaultBudgetNodes is spec.disruption.budgets[].nodes, and the single budget a NodePool gets when
	// it lists none (schema default).
	DefaultBudgetNodes = "10%"
	// DefaultExpireAfter is spec.template.spec.expireAfter of a NodePool and spec.expireAfter of a
	// NodeClaim (schema default): 30 days.
	DefaultExpireAfter = "720h"
	// DefaultLocalRegion is spec.region of a LocalNodeClass (schema default).
	DefaultLocalRegion = "us-east-1"
	// DefaultLocalRegistrationDelay is spec.nodeRegistrationDelay of a LocalNodeClass (schema default).
	DefaultLocalRegistrationDelay = "2s"
)

// Defaults of spec.metadataOptions of an EC2NodeClass (schema defaults): the IMDS endpoint enabled on IPv4
// only, IMDSv2 tokens required and a PUT response hop limit of 1, which keeps the instance role's
// credentials out of reach of pods that do not use the host network.
const (
	DefaultHTTPEndpoint            = "enabled"
	DefaultHTTPProtocolIPv6        = "disabled"
	DefaultHTTPPutResponseHopLimit = 1
	DefaultHTTPTokens              = "required"
)

// Node class API groups and kinds, used to complete a nodeClassRef that names only one of the two.
const (
	ec2NodeClassKind   = "EC2NodeClass"
	localNodeClassKind = "LocalNodeClass"
)

var localNodeClassGroup = v1alpha1.GroupVersion.Group

// defaultNodePool sets:
//   - spec.disruption, when absent, to an empty block that the next defaults fill (schema default
//     {consolidateAfter: 0s});
//   - spec.disruption.consolidateAfter: 0s (schema default; Karpenter made it optional in #3220, and a
//     disruption block without it is rejected by CRDs from before that change);
//   - spec.disruption.consolidationPolicy: WhenEmptyOrUnderutilized (schema default);
//   - spec.disruption.budgets: [{nodes: 10%}] when absent (schema default), and nodes: 10% in every
//     budget that has no nodes (schema default);
//   - spec.template.spec.expireAfter: 720h (schema default);
//   - spec.template.spec.nodeClassRef.group or .kind when only the other one is given and it names a
//     node class Joiner knows (karpenter.k8s.aws ⇔ EC2NodeClass, joiner.dev ⇔ LocalNodeClass) — not a
//     schema default, but what a user writing the v1beta1-style {kind, name} expects.
//
// It creates none of spec, spec.template or spec.template.spec: an object without them is invalid and
// is left for schema validation to reject.
func defaultNodePool(obj map[string]any) bool {
	spec, ok := childObject(obj, "spec")
	if !ok {
		return false
	}
	disruption, changed := defaultObject(spec, "disruption",
		fieldDefault{"consolidateAfter", DefaultConsolidateAfter},
		fieldDefault{"consolidationPolicy", DefaultConsolidationPolicy})
	if disruption != nil {
		if absent(disruption, "budgets") {
			disruption["budgets"] = []any{map[string]any{"nodes": DefaultBudgetNodes}}
			changed = true
		} else if budgets, ok := disruption["budgets"].([]any); ok {
			for _, b := range budgets {
				if budget, ok := b.(map[string]any); ok && budget != nil {
					changed = setDefault(budget, "nodes", DefaultBudgetNodes) || changed
				}
			}
		}
	}
	if tplSpec, ok := objectAt(spec, "template", "spec"); ok {
		changed = setDefault(tplSpec, "expireAfter", DefaultExpireAfter) || changed
		if ref, ok := childObject(tplSpec, "nodeClassRef"); ok {
			changed = defaultNodeClassRef(ref) || changed
		}
	}
	return changed
}

// defaultNodeClaim sets spec.expireAfter: 720h (schema default) and completes spec.nodeClassRef like
// defaultNodePool does.
func defaultNodeClaim(obj map[string]any) bool {
	spec, ok := childObject(obj, "spec")
	if !ok {
		return false
	}
	changed := setDefault(spec, "expireAfter", DefaultExpireAfter)
	if ref, ok := childObject(spec, "nodeClassRef"); ok {
		changed = defaultNodeClassRef(ref) || changed
	}
	return changed
}

// defaultNodeClassRef fills the group from the kind or the kind from the group of a node class Joiner
// knows. An empty string counts as missing: the CRD rejects empty group and kind anyway.
func defaultNodeClassRef(ref map[string]any) bool {
	group, groupOK := ref["group"].(string)
	kind, kindOK := ref["kind"].(string)
	groupMissing := absent(ref, "group") || (groupOK && group == "")
	kindMissing := absent(ref, "kind") || (kindOK && kind == "")
	switch {
	case groupMissing && kindOK && kind == ec2NodeClassKind:
		ref["group"] = awsv1.Group
	case groupMissing && kindOK && kind == localNodeClassKind:
		ref["group"] = localNodeClassGroup
	case kindMissing && groupOK && group == awsv1.Group:
		ref["kind"] = ec2NodeClassKind
	case kindMissing && groupOK && group == localNodeClassGroup:
		ref["kind"] = localNodeClassKind
	default:
		return false
	}
	return true
}

// defaultEC2NodeClass sets spec.metadataOptions to the IMDS defaults when absent, and fills each missing
// field of a partial metadataOptions (schema defaults of the block and of its fields).
func defaultEC2NodeClass(obj map[string]any) bool {
	spec, ok := childObject(obj, "spec")
	if !ok {
		return false
	}
	_, changed := defaultObject(spec, "metadataOptions",
		fieldDefault{"httpEndpoint", DefaultHTTPEndpoint},
		fieldDefault{"httpProtocolIPv6", DefaultHTTPProtocolIPv6},
		fieldDefault{"httpPutResponseHopLimit", int64(DefaultHTTPPutResponseHopLimit)},
		fieldDefault{"httpTokens", DefaultHTTPTokens})
	return changed
}

// defaultLocalNodeClass sets spec.region: us-east-1 and spec.nodeRegistrationDelay: 2s (schema
// defaults). Unlike the schema it also creates spec when it is missing, so that a bare
// `kind: LocalNodeClass` with only a name is a usable class, as a user would expect.
func defaultLocalNodeClass(obj map[string]any) bool {
	_, changed := defaultObject(obj, "spec",
		fieldDefault{"region", DefaultLocalRegion},
		fieldDefault{"nodeRegistrationDelay", DefaultLocalRegistrationDelay})
	return changed
}

// Defaulter is the mutating handler of one kind. It patches in the defaults its defaulting function
// (defaultNodePool, defaultNodeClaim, defaultEC2NodeClass, defaultLocalNodeClass) documents, as a JSON
// patch computed against the raw request object so that nothing the user wrote is re-encoded. It only
// adds what is missing: a value the user wrote, including the exact spelling of a duration, is never
// rewritten, so defaulting a defaulted object yields no patch. An object that needs no default gets an
// admission without a patch.
type Defaulter struct {
	kind       string
	apply      func(map[string]any) bool
	createOnly bool
}

// NewNodePoolDefaulter returns the defaulting handler of NodePools (/default/nodepool). It defaults on
// CREATE and UPDATE.
func NewNodePoolDefaulter() *Defaulter {
	return &Defaulter{kind: "NodePool", apply: defaultNodePool}
}

// NewNodeClaimDefaulter returns the defaulting handler of NodeClaims (/default/nodeclaim). A NodeClaim's
// spec is immutable, so it defaults on CREATE only: adding a default to an old NodeClaim on UPDATE would
// make the API server reject the update (and could leave its finalizer stuck).
func NewNodeClaimDefaulter() *Defaulter {
	return &Defaulter{kind: "NodeClaim", apply: defaultNodeClaim, createOnly: true}
}

// NewEC2NodeClassDefaulter returns the defaulting handler of EC2NodeClasses (/default/ec2nodeclass).
func NewEC2NodeClassDefaulter() *Defaulter {
	return &Defaulter{kind: ec2NodeClassKind, apply: defaultEC2NodeClass}
}

// NewLocalNodeClassDefaulter returns the defaulting handler of LocalNodeClasses (/default/localnodeclass).
func NewLocalNodeClassDefaulter() *Defaulter {
	return &Defaulter{kind: localNodeClassKind, apply: defaultLocalNodeClass}
}

// Handle implements admission.Handler.
func (d *Defaulter) Handle(ctx context.Context, req admission.Request) admission.Response {
	return d.HandleDecoded(ctx, NewRequest(req))
}

// HandleDecoded implements DecodedHandler. It defaults a copy of the decoded object.
func (d *Defaulter) HandleDecoded(_ context.Context, req *Request) admission.Response {
	if req.Kind.Kind != d.kind {
		return badRequest(fmt.Errorf("this webhook defaults %s objects but the request is for kind %q; check the webhook configuration's rules", d.kind, req.Kind.Kind))
	}
	switch {
	case req.Operation == admissionv1.Create:
	case req.Operation == admissionv1.Update && !d.createOnly:
	default:
		return admission.Allowed("")
	}
	content, err := req.New.Content()
	if err != nil {
		return badRequest(fmt.Errorf("default %s %q: decode JSON: %w", d.kind, req.Name, err))
	}
	obj := runtime.DeepCopyJSON(content)
	if !d.apply(obj) {
		return admission.Allowed("")
	}
	return patchResponse(req.New, obj, func(err error) error {
		return fmt.Errorf("default %s %q: encode defaulted object: %w", d.kind, req.Name, err)
	})
}

// patchResponse admits a mutated copy of the request object obj with the JSON patch from the object as
// it came (its raw JSON, so that nothing the user wrote is re-encoded) to the copy. describe wraps an
// encoding failure.
func patchResponse(original *Object, obj map[string]any, describe func(error) error) admission.Response {
	raw, err := original.Raw()
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, describe(err))
	}
	current, err := json.Marshal(obj)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, describe(err))
	}
	return admission.PatchResponseFromRaw(raw, current)
}
