package webhooks_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/webhooks"
)

// TestRegisterServesEveryPath sends AdmissionReviews through the webhook server's mux, as the API server
// would, without starting TLS.
func TestRegisterServesEveryPath(t *testing.T) {
	server := webhook.NewServer(webhook.Options{})
	engine := policy.New(policy.Options{})
	err := webhooks.Register(server, webhooks.Dependencies{
		Engine: engine,
		Reader: fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(append(tenancyObjects(), ec2NodeClass("default"))...).Build(),
	})
	if err != nil {
		t.Fatal(err)
	}
	review := func(t *testing.T, path string, req admissionRequest) admissionv1.AdmissionResponse {
		t.Helper()
		body, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1TypeMeta(),
			Request:  &req.AdmissionRequest,
		})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		httpReq := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
		httpReq.Header.Set("Content-Type", "application/json")
		server.WebhookMux().ServeHTTP(rec, httpReq)
		if rec.Code != http.StatusOK {
			t.Fatalf("%s: HTTP %d: %s", path, rec.Code, rec.Body)
		}
		var out admissionv1.AdmissionReview
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
			t.Fatalf("%s: bad review %s: %v", path, rec.Body, err)
		}
		if out.Response.UID != req.UID {
			t.Fatalf("%s: response UID %q, want %q", path, out.Response.UID, req.UID)
		}
		return *out.Response
	}

	np := nodePool("general")
	requests := map[string]admissionRequest{
		webhooks.PathDefaultNodePool:            request("NodePool", admissionv1.Create, "", "general", `{"kind":"NodePool","spec":{"template":{"spec":{}}}}`, nil),
		webhooks.PathDefaultNodeClaim:           request("NodeClaim", admissionv1.Create, "", "c", `{"kind":"NodeClaim","spec":{}}`, nil),
		webhooks.PathDefaultEC2NodeClass:        request("EC2NodeClass", admissionv1.Create, "", "d", `{"kind":"EC2NodeClass","spec":{}}`, nil),
		webhooks.PathDefaultLocalNodeClass:      request("LocalNodeClass", admissionv1.Create, "", "l", `{"kind":"LocalNodeClass"}`, nil),
		webhooks.PathValidateNodePool:           request("NodePool", admissionv1.Create, "", "general", np, nil),
		webhooks.PathValidateNodeClaim:          request("NodeClaim", admissionv1.Create, "", "c", nodeClaim("c"), nil),
		webhooks.PathValidateEC2NodeClass:       request("EC2NodeClass", admissionv1.Create, "", "d", ec2NodeClass("d"), nil),
		webhooks.PathValidateLocalNodeClass:     request("LocalNodeClass", admissionv1.Create, "", "l", `{"kind":"LocalNodeClass","spec":{"region":"us-east-1"}}`, nil),
		webhooks.PathValidateProvisioningPolicy: request("ProvisioningPolicy", admissionv1.Create, "", "p", provisioningPolicy(regoMaxWeight, "Deny", ""), nil),
		webhooks.PathMutatePod:                  podRequest(admissionv1.Create, pod("team-a", nil), nil),
		webhooks.PathValidatePod:                podRequest(admissionv1.Create, pod("team-a", nil), nil),
		webhooks.PathValidateWorkload:           workloadRequest("Deployment", admissionv1.Create, "team-a", onPool("team-a"), nil),
	}
	wantPatch := map[string]bool{
		webhooks.PathDefaultNodePool: true, webhooks.PathDefaultNodeClaim: true, webhooks.PathDefaultEC2NodeClass: true,
		webhooks.PathDefaultLocalNodeClass: true, webhooks.PathMutatePod: true,
	}
	if len(webhooks.Paths()) != len(requests) {
		t.Fatalf("Paths() has %d entries, the test covers %d", len(webhooks.Paths()), len(requests))
	}
	for _, path := range webhooks.Paths() {
		t.Run(path, func(t *testing.T) {
			resp := review(t, path, requests[path])
			if !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			if got := len(resp.Patch) > 0; got != wantPatch[path] {
				t.Fatalf("patch %s, want a patch: %v", resp.Patch, wantPatch[path])
			}
		})
	}

	// A denial travels as a 403 with every line.
	bad := nodePool("general")
	bad.Spec.Template.Spec.Requirements = append(bad.Spec.Template.Spec.Requirements, req("joiner.dev/team", "NotIn", "a"))
	resp := review(t, webhooks.PathValidateNodePool, request("NodePool", admissionv1.Create, "", "general", bad, nil))
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusForbidden {
		t.Fatalf("want a 403 denial, got %+v", resp)
	}
}

func TestNewHandlersRequiresDependencies(t *testing.T) {
	reader := client.Reader(fake.NewClientBuilder().WithScheme(testScheme(t)).Build())
	if _, err := webhooks.NewHandlers(webhooks.Dependencies{Reader: reader}); err == nil {
		t.Error("NewHandlers without an engine returned no error")
	}
	if _, err := webhooks.NewHandlers(webhooks.Dependencies{Engine: policy.New(policy.Options{})}); err == nil {
		t.Error("NewHandlers without a reader returned no error")
	}
	// Two handler sets may share one registry (the metrics are shared, not registered twice).
	e := newEnv(t, envOptions{})
	if _, err := webhooks.NewHandlers(webhooks.Dependencies{Engine: e.engine, Reader: reader, Registerer: e.registry}); err != nil {
		t.Errorf("second handler set on one registry: %v", err)
	}
}

// TestHandlersConcurrent runs the handlers from several goroutines, as the webhook server does; run with
// -race to check they share no unsynchronised state.
func TestHandlersConcurrent(t *testing.T) {
	e := newEnv(t, envOptions{
		objects:       append(tenancyObjects(), ec2NodeClass("default")),
		policies:      []policy.Policy{testPolicy("require-team", policy.ActionDryRun, regoRequireTeam, nil)},
		instanceTypes: catalogLister(),
	})
	np := nodePool("general")
	bad := nodePool("general")
	bad.Spec.Template.Spec.Requirements = append(bad.Spec.Template.Spec.Requirements, req("joiner.dev/team", "NotIn", "a"))
	done := make(chan error, 8)
	for i := range 8 {
		go func() {
			for range 20 {
				if resp := e.handle(t, webhooks.PathValidateNodePool, request("NodePool", admissionv1.Create, "", "general", np, nil)); !resp.Allowed {
					done <- fmt.Errorf("goroutine %d: valid NodePool denied: %s", i, message(resp))
					return
				}
				if resp := e.handle(t, webhooks.PathValidateNodePool, request("NodePool", admissionv1.Create, "", "general", bad, nil)); resp.Allowed {
					done <- fmt.Errorf("goroutine %d: contradicting NodePool admitted", i)
					return
				}
				if resp := e.handle(t, webhooks.PathMutatePod, podRequest(admissionv1.Create, pod("team-ab", nil), nil)); len(resp.Patches) == 0 {
					done <- fmt.Errorf("goroutine %d: pod not mutated", i)
					return
				}
			}
			done <- nil
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := e.counter(t, webhooks.MetricPolicyViolations, map[string]string{"policy": "require-team", "action": "DryRun"}); got != 8*20*2 {
		t.Fatalf("dry-run violations counted %v, want %d", got, 8*20*2)
	}
}
