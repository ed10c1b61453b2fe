package webhooks_test

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/webhooks"
)

func nodeClaim(name string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: "general"}},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				req(karpv1.NodePoolLabelKey, corev1.NodeSelectorOpIn, "general"),
				req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large", "m7g.large"),
			},
			NodeClassRef: &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
		},
	}
}

func TestValidateNodeClaim(t *testing.T) {
	tests := []struct {
		name         string
		mutate       func(nc *karpv1.NodeClaim)
		user         string
		wantDenials  []string
		wantWarnings []string
	}{
		{name: "valid NodeClaim", mutate: func(*karpv1.NodeClaim) {}},
		{
			name: "label contradicts a requirement",
			mutate: func(nc *karpv1.NodeClaim) {
				nc.Labels[karpv1.NodePoolLabelKey] = "other"
			},
			wantDenials: []string{"spec.requirements[0]: karpenter.sh/nodepool In [general] contradicts metadata.labels[karpenter.sh/nodepool] (karpenter.sh/nodepool=other); no node can satisfy both, remove one or change its values"},
		},
		{
			name: "no instance type in the catalog",
			mutate: func(nc *karpv1.NodeClaim) {
				nc.Spec.Requirements[1] = req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m9z.huge")
			},
			wantDenials: []string{"spec.requirements[1]: no instance type in the catalog satisfies node.kubernetes.io/instance-type In [m9z.huge]"},
		},
		{
			name: "duplicate taints and missing node class",
			mutate: func(nc *karpv1.NodeClaim) {
				nc.Spec.Taints = []karpv1.Taint{{Key: "gpu", Effect: corev1.TaintEffectNoSchedule}}
				nc.Spec.StartupTaints = []karpv1.Taint{{Key: "gpu", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
				nc.Spec.NodeClassRef.Name = "gone"
			},
			wantDenials:  []string{"spec.startupTaints[0]: taint gpu=x:NoSchedule duplicates spec.taints[0] (same key and effect); remove one of them"},
			wantWarnings: []string{`spec.nodeClassRef: EC2NodeClass "gone" does not exist; create it, or the NodeClaim cannot launch`},
		},
		{
			name: "Joiner's own NodeClaims are exempt",
			mutate: func(nc *karpv1.NodeClaim) {
				nc.Spec.Requirements[1] = req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m9z.huge")
			},
			user: webhooks.ServiceAccountUsername,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{objects: []client.Object{ec2NodeClass("default")}, instanceTypes: catalogLister()})
			nc := nodeClaim("general-abcde")
			tc.mutate(nc)
			r := request("NodeClaim", admissionv1.Create, "", nc.Name, nc, nil)
			if tc.user != "" {
				r.UserInfo.Username = tc.user
			}
			resp := e.handle(t, webhooks.PathValidateNodeClaim, r)
			assertDecision(t, resp, len(tc.wantDenials) == 0, tc.wantDenials, tc.wantWarnings)
		})
	}
}

const regoIMDS = `package joiner.test.imds

violation contains {"msg": "IMDS hop limit above 1 exposes node credentials to pods; set it to 1", "field": "spec.metadataOptions.httpPutResponseHopLimit"} if {
	input.review.object.spec.metadataOptions.httpPutResponseHopLimit > 1
}
`

func TestValidateNodeClasses(t *testing.T) {
	imds := policy.Policy{Name: "imds", Rego: regoIMDS, Match: policy.Match{Kinds: []string{"EC2NodeClass"}}}
	hop2 := ec2NodeClass("default")
	hop2.Spec.MetadataOptions = &awsv1.MetadataOptions{HTTPPutResponseHopLimit: ptr(int64(2))}
	local := func(region string, zones ...string) *v1alpha1.LocalNodeClass {
		return &v1alpha1.LocalNodeClass{
			TypeMeta:   metav1.TypeMeta{APIVersion: "joiner.dev/v1alpha1", Kind: "LocalNodeClass"},
			ObjectMeta: metav1.ObjectMeta{Name: "local"},
			Spec:       v1alpha1.LocalNodeClassSpec{Region: region, Zones: zones},
		}
	}
	tests := []struct {
		name        string
		path, kind  string
		obj         any
		wantDenials []string
	}{
		{name: "EC2NodeClass within policy", path: webhooks.PathValidateEC2NodeClass, kind: "EC2NodeClass", obj: ec2NodeClass("default")},
		{
			name: "EC2NodeClass denied by policy", path: webhooks.PathValidateEC2NodeClass, kind: "EC2NodeClass", obj: hop2,
			wantDenials: []string{"[imds] IMDS hop limit above 1 exposes node credentials to pods; set it to 1 (field: spec.metadataOptions.httpPutResponseHopLimit)"},
		},
		{name: "LocalNodeClass zones of its region", path: webhooks.PathValidateLocalNodeClass, kind: "LocalNodeClass", obj: local("eu-west-1", "eu-west-1a", "eu-west-1b")},
		{name: "LocalNodeClass zones of the default region", path: webhooks.PathValidateLocalNodeClass, kind: "LocalNodeClass", obj: local("", "us-east-1c")},
		{
			name: "LocalNodeClass zone of another region", path: webhooks.PathValidateLocalNodeClass, kind: "LocalNodeClass",
			obj: local("us-east-1", "us-east-1a", "us-west-2a", "us-east-12a"),
			wantDenials: []string{
				`spec.zones[1]: "us-west-2a" is not a zone of region "us-east-1"; use zones named us-east-1 followed by a letter, such as us-east-1a, or change spec.region`,
				`spec.zones[2]: "us-east-12a" is not a zone of region "us-east-1"; use zones named us-east-1 followed by a letter, such as us-east-1a, or change spec.region`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{policies: []policy.Policy{imds}})
			resp := e.handle(t, tc.path, request(tc.kind, admissionv1.Create, "", "x", tc.obj, nil))
			assertDecision(t, resp, len(tc.wantDenials) == 0, tc.wantDenials, nil)
		})
	}
}

func provisioningPolicy(rego, action string, params string) string {
	spec := map[string]any{"rego": rego, "match": map[string]any{"kinds": []string{"NodePool"}}}
	if action != "" {
		spec["enforcementAction"] = action
	}
	obj := map[string]any{"apiVersion": "joiner.dev/v1alpha1", "kind": "ProvisioningPolicy", "metadata": map[string]any{"name": "p", "generation": 1}, "spec": spec}
	b := rawJSON(obj)
	if params != "" {
		s := string(b)
		s = strings.Replace(s, `"spec":{`, `"spec":{"parameters":`+params+`,`, 1)
		b = []byte(s)
	}
	return string(b)
}

func TestValidateProvisioningPolicy(t *testing.T) {
	const syntaxError = "package joiner.test\n\nviolation contains {\"msg\": \"x\"} if {\n\tinput.review.object.spec.weight >\n}\n"
	valid := provisioningPolicy(regoMaxWeight, "Deny", `{"max": 50}`)
	broken := provisioningPolicy(syntaxError, "", "")
	tests := []struct {
		name         string
		op           admissionv1.Operation
		obj, old     string
		wantAllowed  bool
		wantContains []string
		wantWarning  string
	}{
		{name: "valid policy", op: admissionv1.Create, obj: valid, wantAllowed: true},
		{name: "Rego syntax error with line and column", op: admissionv1.Create, obj: broken, wantContains: []string{"policy p: ", "spec.rego:5:1: rego_parse_error"}},
		{name: "no violation rule", op: admissionv1.Create, obj: provisioningPolicy("package joiner.test\n\nallow := true\n", "", ""), wantContains: []string{`spec.rego: no rule "violation" in package joiner.test`}},
		{name: "forbidden builtin", op: admissionv1.Create, obj: provisioningPolicy("package joiner.test\n\nviolation contains {\"msg\": \"x\"} if {\n\thttp.send({\"method\": \"get\", \"url\": \"https://example.com\"})\n}\n", "", ""), wantContains: []string{"spec.rego:4:2:", "builtin http.send is not allowed"}},
		{name: "unknown enforcement action", op: admissionv1.Create, obj: provisioningPolicy(regoMaxWeight, "Audit", ""), wantContains: []string{`spec.enforcementAction: "Audit" is not supported; use Deny, Warn or DryRun`}},
		{name: "parameters that are not an object", op: admissionv1.Create, obj: provisioningPolicy(regoMaxWeight, "", `[1,2]`), wantContains: []string{"spec.parameters: must be an object, got an array"}},
		{name: "fix of a broken policy", op: admissionv1.Update, obj: valid, old: broken, wantAllowed: true},
		{name: "update of a policy that was already broken the same way", op: admissionv1.Update, obj: broken, old: broken, wantAllowed: true, wantWarning: "pre-existing: policy p: spec.rego:5:1: rego_parse_error"},
		{name: "breaking a valid policy", op: admissionv1.Update, obj: broken, old: valid, wantContains: []string{"spec.rego:5:1: rego_parse_error"}},
		{name: "delete", op: admissionv1.Delete, old: broken, wantAllowed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{})
			var obj, old any
			if tc.obj != "" {
				obj = tc.obj
			}
			if tc.old != "" {
				old = tc.old
			}
			resp := e.handle(t, webhooks.PathValidateProvisioningPolicy, request("ProvisioningPolicy", tc.op, "", "p", obj, old))
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed = %v, want %v: %q", resp.Allowed, tc.wantAllowed, message(resp))
			}
			for _, want := range tc.wantContains {
				if !strings.Contains(message(resp), want) {
					t.Fatalf("message %q does not contain %q", message(resp), want)
				}
			}
			if tc.wantWarning != "" && (len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], tc.wantWarning)) {
				t.Fatalf("warnings %q, want one starting %q", resp.Warnings, tc.wantWarning)
			}
			for _, w := range resp.Warnings {
				if strings.HasSuffix(w, "…") {
					t.Fatalf("warning was cut: %q", w)
				}
			}
		})
	}
}
