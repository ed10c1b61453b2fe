package webhooks_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/webhooks"
)

// testScheme knows every kind the handlers read.
func testScheme(t testing.TB) *runtime.Scheme {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// env is one set of handlers over a fake cluster and a real policy engine.
type env struct {
	handlers map[string]webhooks.DecodedHandler
	engine   *policy.Engine
	registry *prometheus.Registry

	mu     sync.Mutex
	dryRun []policy.Violation
}

type envOptions struct {
	objects       []client.Object
	policies      []policy.Policy
	instanceTypes webhooks.InstanceTypeLister
	reader        client.Reader
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	e := &env{engine: policy.New(policy.Options{}), registry: prometheus.NewRegistry()}
	if err := e.engine.SetPolicies(context.Background(), o.policies); err != nil {
		t.Fatalf("policies do not compile: %v", err)
	}
	reader := o.reader
	if reader == nil {
		reader = fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(o.objects...).Build()
	}
	handlers, err := webhooks.NewHandlers(webhooks.Dependencies{
		Engine:        e.engine,
		Reader:        reader,
		InstanceTypes: o.instanceTypes,
		Registerer:    e.registry,
		OnDryRun: func(_ context.Context, _ policy.Review, vs []policy.Violation) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.dryRun = append(e.dryRun, vs...)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.handlers = handlers
	return e
}

func (e *env) handle(t testing.TB, path string, req admission.Request) admission.Response {
	t.Helper()
	h, ok := e.handlers[path]
	if !ok {
		t.Fatalf("no handler for %s", path)
	}
	return h.Handle(context.Background(), req)
}

// counter returns the value of a counter of the registry with the given labels, or 0.
func (e *env) counter(t testing.TB, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := e.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue metric
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// request builds an admission request. obj and old are marshalled to JSON unless they are already
// []byte; nil leaves the field empty.
func request(kind string, op admissionv1.Operation, namespace, name string, obj, old any) admission.Request {
	gvk := metav1.GroupVersionKind{Kind: kind}
	switch kind {
	case "NodePool", "NodeClaim":
		gvk.Group, gvk.Version = karpv1.Group, "v1"
	case "EC2NodeClass":
		gvk.Group, gvk.Version = awsv1.Group, "v1"
	case "LocalNodeClass", "ProvisioningPolicy":
		gvk.Group, gvk.Version = v1alpha1.GroupVersion.Group, v1alpha1.GroupVersion.Version
	default:
		gvk.Version = "v1"
	}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "0c8b2a1e-1111-4e8f-9d6a-5f5b2c3d4e5f",
		Kind:      gvk,
		Operation: op,
		Name:      name,
		Namespace: namespace,
		UserInfo:  authenticationv1.UserInfo{Username: "alice@example.com", Groups: []string{"system:authenticated"}},
	}}
	req.Object.Raw = rawJSON(obj)
	req.OldObject.Raw = rawJSON(old)
	return req
}

func rawJSON(v any) []byte {
	switch x := v.(type) {
	case nil:
		return nil
	case []byte:
		return x
	case string:
		return []byte(x)
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// applyPatch applies a response's JSON patch to raw and returns the result.
func applyPatch(t testing.TB, raw []byte, resp admission.Response) []byte {
	t.Helper()
	if len(resp.Patches) == 0 {
		return raw
	}
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatalf("decode patch %s: %v", ops, err)
	}
	out, err := patch.Apply(raw)
	if err != nil {
		t.Fatalf("apply patch %s to %s: %v", ops, raw, err)
	}
	return out
}

// message returns the response's status message.
func message(resp admission.Response) string {
	if resp.Result == nil {
		return ""
	}
	return resp.Result.Message
}

// assertAllowed fails unless resp admits without warnings other than want.
func assertDecision(t testing.TB, resp admission.Response, wantAllowed bool, wantDenials, wantWarnings []string) {
	t.Helper()
	if resp.Allowed != wantAllowed {
		t.Fatalf("allowed = %v, want %v; message %q, warnings %q", resp.Allowed, wantAllowed, message(resp), resp.Warnings)
	}
	if !wantAllowed {
		got := strings.Split(message(resp), "\n")
		if !equalStrings(got, wantDenials) {
			t.Fatalf("denial lines:\n got %q\nwant %q", got, wantDenials)
		}
	}
	if !equalStrings(resp.Warnings, wantWarnings) {
		t.Fatalf("warnings:\n got %q\nwant %q", resp.Warnings, wantWarnings)
	}
	for _, w := range resp.Warnings {
		if strings.HasSuffix(w, "…") {
			t.Fatalf("warning was cut: %q", w)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// nodePool returns a valid NodePool: it satisfies the test catalog, its node class exists in the
// default fixtures and its limits are above its usage.
func nodePool(name string) *karpv1.NodePool {
	weight := int32(10)
	np := &karpv1.NodePool{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodePool"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{
				TemplateObjectMeta: karpv1.TemplateObjectMeta{Labels: map[string]string{"joiner.dev/team": "a"}},
				Spec: karpv1.NodeClaimTemplateSpec{
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
						{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64", "arm64"}},
						{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spot", "on-demand"}},
						{Key: "joiner.dev/team", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
					},
					NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
					Taints:       []karpv1.Taint{{Key: "joiner.dev/team", Value: "a", Effect: corev1.TaintEffectNoSchedule}},
				},
			},
			Disruption: karpv1.Disruption{
				ConsolidateAfter:    mustDuration("1m"),
				ConsolidationPolicy: karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized,
				Budgets:             []karpv1.Budget{{Nodes: "10%"}},
			},
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")},
			Weight: &weight,
		},
	}
	return np
}

func ec2NodeClass(name string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.k8s.aws/v1", Kind: "EC2NodeClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{
			Role:             "KarpenterNodeRole",
			AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		},
	}
}

// testCatalog is a small instance-type catalog: amd64 m5 types, arm64 m7g types and one GPU type.
func testCatalog() []webhooks.InstanceTypeLabels {
	it := func(name, arch, family, cpu string, extra map[string][]string) webhooks.InstanceTypeLabels {
		labels := webhooks.InstanceTypeLabels{
			corev1.LabelInstanceTypeStable: {name},
			corev1.LabelArchStable:         {arch},
			corev1.LabelOSStable:           {"linux"},
			awsv1.LabelInstanceFamily:      {family},
			awsv1.LabelInstanceCPU:         {cpu},
			corev1.LabelTopologyZone:       {"us-east-1a", "us-east-1b"},
			karpv1.CapacityTypeLabelKey:    {"spot", "on-demand"},
		}
		for k, v := range extra {
			labels[k] = v
		}
		return labels
	}
	return []webhooks.InstanceTypeLabels{
		it("m5.large", "amd64", "m5", "2", nil),
		it("m5.xlarge", "amd64", "m5", "4", nil),
		it("m5.4xlarge", "amd64", "m5", "16", nil),
		it("m7g.large", "arm64", "m7g", "2", nil),
		it("m7g.xlarge", "arm64", "m7g", "4", nil),
		it("g5.xlarge", "amd64", "g5", "4", map[string][]string{awsv1.LabelInstanceGPUName: {"a10g"}, corev1.LabelTopologyZone: {"us-east-1a"}}),
	}
}

func mustDuration(s string) karpv1.NillableDuration {
	d, err := karpv1.ParseNillableDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

// admissionRequest is admission.Request, named for table fields.
type admissionRequest = admission.Request

func metav1TypeMeta() metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}
}
