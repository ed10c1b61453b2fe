package webhooks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"unicode/utf8"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/webhooks"
)

// fuzzOperation maps the fuzzer's operation byte to an admission operation, including invalid ones.
func fuzzOperation(b uint8) admissionv1.Operation {
	ops := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect, "", "PATCH"}
	return ops[int(b)%len(ops)]
}

// fuzzEnv is a full set of handlers with policies of every action, a catalog and tenancy fixtures, so
// fuzzed objects reach every code path.
func fuzzEnv(f *testing.F) *env {
	kinds := []string{"NodePool", "NodeClaim", "EC2NodeClass", "LocalNodeClass", "Pod"}
	all := func(name string, action policy.Action, rego string) policy.Policy {
		return policy.Policy{Name: name, Rego: rego, EnforcementAction: action, Match: policy.Match{Kinds: kinds}}
	}
	return newEnv(f, envOptions{
		objects: append(tenancyObjects(), ec2NodeClass("default")),
		policies: []policy.Policy{
			all("max-weight", policy.ActionDeny, regoMaxWeight),
			all("require-team", policy.ActionWarn, regoRequireTeam),
			all("no-latest", policy.ActionDryRun, regoNoLatest),
			all("broken", policy.ActionDeny, regoBroken),
		},
		instanceTypes: catalogLister(),
	})
}

// fuzzHandler feeds arbitrary requests to the handler at path and checks the invariants every response
// must keep: no panic, a denial only with a message, valid, non-empty warnings and, for mutating
// handlers, a patch that applies to the request object and that is not needed a second time
// (idempotence).
func fuzzHandler(f *testing.F, path, kind string, seeds ...any) {
	for _, s := range seeds {
		raw := rawJSON(s)
		f.Add(uint8(0), raw, []byte(nil), "")
		f.Add(uint8(1), raw, raw, "team-a")
	}
	e := fuzzEnv(f)
	h := e.handlers[path]
	f.Fuzz(func(t *testing.T, op uint8, obj, old []byte, namespace string) {
		req := request(kind, fuzzOperation(op), namespace, "fuzzed", obj, old)
		resp := h.Handle(context.Background(), req)
		checkResponse(t, resp)
		if !resp.Allowed || len(resp.Patches) == 0 {
			return
		}
		patched := applyFuzzPatch(t, obj, resp)
		req.Object.Raw = patched
		if again := h.Handle(context.Background(), req); len(again.Patches) != 0 {
			t.Fatalf("not idempotent: second patch %v for %s", again.Patches, patched)
		}
	})
}

func checkResponse(t *testing.T, resp admission.Response) {
	t.Helper()
	if !resp.Allowed && (resp.Result == nil || resp.Result.Message == "") {
		t.Fatalf("denial without a message: %+v", resp.AdmissionResponse)
	}
	for _, w := range resp.Warnings {
		if !utf8.ValidString(w) || w == "" {
			t.Fatalf("bad warning %q", w)
		}
	}
	if _, err := json.Marshal(resp.Patches); err != nil {
		t.Fatalf("patch does not encode: %v", err)
	}
}

func applyFuzzPatch(t *testing.T, raw []byte, resp admission.Response) []byte {
	t.Helper()
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatalf("patch %s does not decode: %v", ops, err)
	}
	out, err := patch.Apply(bytes.TrimSpace(raw))
	if err != nil {
		t.Fatalf("patch %s does not apply to %s: %v", ops, raw, err)
	}
	return out
}

func FuzzDefaultNodePool(f *testing.F) {
	fuzzHandler(f, webhooks.PathDefaultNodePool, "NodePool", nodePool("general"), `{"kind":"NodePool","spec":{"template":{"spec":{}}}}`)
}

func FuzzDefaultNodeClaim(f *testing.F) {
	fuzzHandler(f, webhooks.PathDefaultNodeClaim, "NodeClaim", nodeClaim("c"), `{"kind":"NodeClaim","spec":{"nodeClassRef":{"kind":"EC2NodeClass"}}}`)
}

func FuzzDefaultEC2NodeClass(f *testing.F) {
	fuzzHandler(f, webhooks.PathDefaultEC2NodeClass, "EC2NodeClass", ec2NodeClass("d"), `{"kind":"EC2NodeClass","spec":{"metadataOptions":{"httpTokens":"optional"}}}`)
}

func FuzzDefaultLocalNodeClass(f *testing.F) {
	fuzzHandler(f, webhooks.PathDefaultLocalNodeClass, "LocalNodeClass", `{"kind":"LocalNodeClass"}`, `{"kind":"LocalNodeClass","spec":{"region":"eu-west-1"}}`)
}

func FuzzValidateNodePool(f *testing.F) {
	np := nodePool("general")
	np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req("karpenter.k8s.aws/instance-cpu", "Gt", "4"))
	fuzzHandler(f, webhooks.PathValidateNodePool, "NodePool", nodePool("general"), np)
}

func FuzzValidateNodeClaim(f *testing.F) {
	fuzzHandler(f, webhooks.PathValidateNodeClaim, "NodeClaim", nodeClaim("c"))
}

func FuzzValidateEC2NodeClass(f *testing.F) {
	fuzzHandler(f, webhooks.PathValidateEC2NodeClass, "EC2NodeClass", ec2NodeClass("d"))
}

func FuzzValidateLocalNodeClass(f *testing.F) {
	fuzzHandler(f, webhooks.PathValidateLocalNodeClass, "LocalNodeClass", `{"kind":"LocalNodeClass","spec":{"region":"us-east-1","zones":["us-east-1a","us-west-2b"]}}`)
}

func FuzzValidateProvisioningPolicy(f *testing.F) {
	fuzzHandler(f, webhooks.PathValidateProvisioningPolicy, "ProvisioningPolicy", provisioningPolicy(regoMaxWeight, "Deny", `{"max":50}`))
}

func FuzzMutatePod(f *testing.F) {
	fuzzHandler(f, webhooks.PathMutatePod, "Pod", pod("team-a", nil), pod("team-ab", nil))
}

func FuzzValidatePod(f *testing.F) {
	fuzzHandler(f, webhooks.PathValidatePod, "Pod", pod("team-a", nil), `{"spec":{"tolerations":[{"operator":"Exists"}],"nodeSelector":{"karpenter.sh/nodepool":"team-b"}}}`)
}
