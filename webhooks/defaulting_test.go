package webhooks_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/joiner-dev/joiner/webhooks"
)

func decode(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return m
}

func TestDefaulting(t *testing.T) {
	tests := []struct {
		name string
		path string
		kind string
		in   string
		want string // the object after the patch; equal to in when no patch is expected
	}{
		{
			name: "NodePool without disruption or expireAfter",
			path: webhooks.PathDefaultNodePool, kind: "NodePool",
			in: `{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"a"},
				"spec":{"template":{"spec":{"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"requirements":[]}}}}`,
			want: `{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"a"},
				"spec":{"template":{"spec":{"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"requirements":[],"expireAfter":"720h"}},
				"disruption":{"consolidateAfter":"0s","consolidationPolicy":"WhenEmptyOrUnderutilized","budgets":[{"nodes":"10%"}]}}}`,
		},
		{
			name: "NodePool keeps what the user wrote, including duration spelling",
			path: webhooks.PathDefaultNodePool, kind: "NodePool",
			in: `{"kind":"NodePool","metadata":{"name":"a"},"spec":{"template":{"spec":{"expireAfter":"1h30m","requirements":[]}},
				"disruption":{"consolidateAfter":"90m","consolidationPolicy":"WhenEmpty","budgets":[{"nodes":"5"},{"schedule":"@daily","duration":"1h0m"}]}}}`,
			want: `{"kind":"NodePool","metadata":{"name":"a"},"spec":{"template":{"spec":{"expireAfter":"1h30m","requirements":[]}},
				"disruption":{"consolidateAfter":"90m","consolidationPolicy":"WhenEmpty","budgets":[{"nodes":"5"},{"schedule":"@daily","duration":"1h0m","nodes":"10%"}]}}}`,
		},
		{
			name: "NodePool with Never and an explicit empty budget list",
			path: webhooks.PathDefaultNodePool, kind: "NodePool",
			in:   `{"kind":"NodePool","spec":{"template":{"spec":{"expireAfter":"Never"}},"disruption":{"consolidateAfter":"Never","consolidationPolicy":"WhenEmpty","budgets":[]}}}`,
			want: `{"kind":"NodePool","spec":{"template":{"spec":{"expireAfter":"Never"}},"disruption":{"consolidateAfter":"Never","consolidationPolicy":"WhenEmpty","budgets":[]}}}`,
		},
		{
			name: "NodePool null fields are defaulted like missing ones",
			path: webhooks.PathDefaultNodePool, kind: "NodePool",
			in:   `{"kind":"NodePool","spec":{"template":{"spec":{"expireAfter":null}},"disruption":null}}`,
			want: `{"kind":"NodePool","spec":{"template":{"spec":{"expireAfter":"720h"}},"disruption":{"consolidateAfter":"0s","consolidationPolicy":"WhenEmptyOrUnderutilized","budgets":[{"nodes":"10%"}]}}}`,
		},
		{
			name: "NodePool nodeClassRef group filled from a known kind",
			path: webhooks.PathDefaultNodePool, kind: "NodePool",
			in:   `{"kind":"NodePool","spec":{"template":{"spec":{"expireAfter":"720h","nodeClassRef":{"kind":"LocalNodeClass","name":"local"}}},"disruption":{"consolidateAfter":"0s","consolidationPolicy":"WhenEmpty","budgets":[]}}}`,
			want: `{"kind":"NodePool","spec":{"template":{"spec":{"expireAfter":"720h","nodeClassRef":{"group":"joiner.dev","kind":"LocalNodeClass","name":"local"}}},"disruption":{"consolidateAfter":"0s","consolidationPolicy":"WhenEmpty","budgets":[]}}}`,
		},
		{
			name: "NodePool of the wrong shape is left for schema validation",
			path: webhooks.PathDefaultNodePool, kind: "NodePool",
			in:   `{"kind":"NodePool","spec":{"template":"x","disruption":"y"}}`,
			want: `{"kind":"NodePool","spec":{"template":"x","disruption":"y"}}`,
		},
		{
			name: "NodePool without spec gets nothing",
			path: webhooks.PathDefaultNodePool, kind: "NodePool",
			in:   `{"kind":"NodePool","metadata":{"name":"a"}}`,
			want: `{"kind":"NodePool","metadata":{"name":"a"}}`,
		},
		{
			name: "NodeClaim expireAfter and nodeClassRef kind",
			path: webhooks.PathDefaultNodeClaim, kind: "NodeClaim",
			in:   `{"kind":"NodeClaim","spec":{"nodeClassRef":{"group":"karpenter.k8s.aws","name":"default"},"requirements":[]}}`,
			want: `{"kind":"NodeClaim","spec":{"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"requirements":[],"expireAfter":"720h"}}`,
		},
		{
			name: "EC2NodeClass without metadataOptions",
			path: webhooks.PathDefaultEC2NodeClass, kind: "EC2NodeClass",
			in: `{"kind":"EC2NodeClass","spec":{"role":"r","amiSelectorTerms":[{"alias":"al2023@latest"}]}}`,
			want: `{"kind":"EC2NodeClass","spec":{"role":"r","amiSelectorTerms":[{"alias":"al2023@latest"}],
				"metadataOptions":{"httpEndpoint":"enabled","httpProtocolIPv6":"disabled","httpPutResponseHopLimit":1,"httpTokens":"required"}}}`,
		},
		{
			name: "EC2NodeClass partial metadataOptions keeps the user's values",
			path: webhooks.PathDefaultEC2NodeClass, kind: "EC2NodeClass",
			in:   `{"kind":"EC2NodeClass","spec":{"metadataOptions":{"httpPutResponseHopLimit":2,"httpTokens":"optional"}}}`,
			want: `{"kind":"EC2NodeClass","spec":{"metadataOptions":{"httpEndpoint":"enabled","httpProtocolIPv6":"disabled","httpPutResponseHopLimit":2,"httpTokens":"optional"}}}`,
		},
		{
			name: "LocalNodeClass without spec",
			path: webhooks.PathDefaultLocalNodeClass, kind: "LocalNodeClass",
			in:   `{"kind":"LocalNodeClass","metadata":{"name":"local"}}`,
			want: `{"kind":"LocalNodeClass","metadata":{"name":"local"},"spec":{"region":"us-east-1","nodeRegistrationDelay":"2s"}}`,
		},
		{
			name: "LocalNodeClass keeps its region and delay",
			path: webhooks.PathDefaultLocalNodeClass, kind: "LocalNodeClass",
			in:   `{"kind":"LocalNodeClass","spec":{"region":"eu-west-1","nodeRegistrationDelay":"1500ms"}}`,
			want: `{"kind":"LocalNodeClass","spec":{"region":"eu-west-1","nodeRegistrationDelay":"1500ms"}}`,
		},
	}
	e := newEnv(t, envOptions{})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			raw := []byte(tc.in)
			resp := e.handle(t, tc.path, request(tc.kind, admissionv1.Create, "", "a", raw, nil))
			if !resp.Allowed {
				t.Fatalf("defaulting denied: %q", message(resp))
			}
			once := applyPatch(t, raw, resp)
			if got, want := decode(t, once), decode(t, []byte(tc.want)); !reflect.DeepEqual(got, want) {
				t.Fatalf("defaulted object:\n got %s\nwant %s", once, tc.want)
			}
			if tc.in == tc.want && len(resp.Patches) != 0 {
				t.Fatalf("no default was due but the patch is %v", resp.Patches)
			}
			// Idempotence: defaulting the defaulted object yields no patch.
			again := e.handle(t, tc.path, request(tc.kind, admissionv1.Create, "", "a", once, nil))
			if !again.Allowed || len(again.Patches) != 0 || again.PatchType != nil {
				t.Fatalf("second defaulting returned patch %v (allowed %v)", again.Patches, again.Allowed)
			}
		})
	}
}

func TestDefaultingOperations(t *testing.T) {
	nodeClaim := `{"kind":"NodeClaim","spec":{"requirements":[]}}`
	nodePool := `{"kind":"NodePool","spec":{"template":{"spec":{}}}}`
	tests := []struct {
		name      string
		path      string
		req       admission.Request
		wantPatch bool
		wantCode  int32
	}{
		{name: "NodePool update is defaulted", path: webhooks.PathDefaultNodePool, req: request("NodePool", admissionv1.Update, "", "a", nodePool, nodePool), wantPatch: true},
		{name: "NodeClaim update is not defaulted (spec is immutable)", path: webhooks.PathDefaultNodeClaim, req: request("NodeClaim", admissionv1.Update, "", "a", nodeClaim, nodeClaim)},
		{name: "delete is admitted unchanged", path: webhooks.PathDefaultNodePool, req: request("NodePool", admissionv1.Delete, "", "a", nil, nodePool)},
		{name: "wrong kind is a bad request", path: webhooks.PathDefaultNodePool, req: request("NodeClaim", admissionv1.Create, "", "a", nodeClaim, nil), wantCode: 400},
		{name: "invalid JSON is a bad request", path: webhooks.PathDefaultNodePool, req: request("NodePool", admissionv1.Create, "", "a", "[1,2]", nil), wantCode: 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]admission.Handler{
				webhooks.PathDefaultNodePool:  webhooks.NewNodePoolDefaulter(),
				webhooks.PathDefaultNodeClaim: webhooks.NewNodeClaimDefaulter(),
			}[tc.path]
			resp := h.Handle(context.Background(), tc.req)
			if tc.wantCode != 0 {
				if resp.Allowed || resp.Result.Code != tc.wantCode {
					t.Fatalf("got %+v, want rejection with code %d", resp.AdmissionResponse, tc.wantCode)
				}
				return
			}
			if !resp.Allowed || (len(resp.Patches) > 0) != tc.wantPatch {
				t.Fatalf("allowed=%v patches=%v, want a patch: %v", resp.Allowed, resp.Patches, tc.wantPatch)
			}
		})
	}
}
