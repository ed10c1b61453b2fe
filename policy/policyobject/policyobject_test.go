package policyobject_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/policyobject"
)

const regoOK = `package joiner.test

violation contains {"msg": "no"} if { input.review.object.spec.weight > input.parameters.maxWeight }
`

func newPolicy(params string) *v1alpha1.ProvisioningPolicy {
	pp := &v1alpha1.ProvisioningPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "max-weight", Generation: 3},
		Spec: v1alpha1.ProvisioningPolicySpec{
			Rego:              regoOK,
			EnforcementAction: v1alpha1.EnforcementWarn,
			Match: v1alpha1.PolicyMatch{
				Kinds:             []string{"NodePool", "Pod"},
				Operations:        []string{"CREATE"},
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
			},
		},
	}
	if params != "" {
		pp.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(params)}
	}
	return pp
}

func TestToPolicy(t *testing.T) {
	got, err := policyobject.ToPolicy(newPolicy(`{"maxWeight": 50, "big": 12345678901234567890}`))
	if err != nil {
		t.Fatal(err)
	}
	want := policy.Policy{
		Name:              "max-weight",
		Generation:        3,
		Rego:              regoOK,
		EnforcementAction: policy.ActionWarn,
		Match: policy.Match{
			Kinds:             []string{"NodePool", "Pod"},
			Operations:        []string{"CREATE"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		},
		Parameters: map[string]any{"maxWeight": json.Number("50"), "big": json.Number("12345678901234567890")},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ToPolicy:\n got %#v\nwant %#v", got, want)
	}
	if err := policy.Validate(got); err != nil {
		t.Fatalf("converted policy does not validate: %v", err)
	}
}

func TestToPolicyDoesNotAlias(t *testing.T) {
	pp := newPolicy("")
	got, err := policyobject.ToPolicy(pp)
	if err != nil {
		t.Fatal(err)
	}
	got.Match.Kinds[0] = "changed"
	got.Match.NamespaceSelector.MatchLabels["env"] = "changed"
	if pp.Spec.Match.Kinds[0] != "NodePool" || pp.Spec.Match.NamespaceSelector.MatchLabels["env"] != "prod" {
		t.Fatal("ToPolicy result shares slices or maps with the ProvisioningPolicy")
	}
}

func TestToPolicyParameters(t *testing.T) {
	tests := []struct {
		name    string
		params  string
		want    map[string]any
		wantErr string
	}{
		{name: "unset", params: "", want: nil},
		{name: "null", params: "null", want: nil},
		{name: "empty object", params: "{}", want: map[string]any{}},
		{name: "nested", params: `{"teams": ["a", "b"], "x": {"y": true}}`, want: map[string]any{"teams": []any{"a", "b"}, "x": map[string]any{"y": true}}},
		{name: "array", params: `[1, 2]`, wantErr: "spec.parameters: must be an object, got an array"},
		{name: "string", params: `"x"`, wantErr: "spec.parameters: must be an object, got a string"},
		{name: "number", params: `7`, wantErr: "spec.parameters: must be an object, got a number"},
		{name: "invalid JSON", params: `{"a":`, wantErr: "spec.parameters: not valid JSON"},
		{name: "trailing data", params: `{} {}`, wantErr: "spec.parameters: trailing data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := policyobject.ToPolicy(newPolicy(tc.params))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want it to contain %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), `"max-weight"`) {
					t.Fatalf("error %q does not name the policy", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Parameters, tc.want) {
				t.Fatalf("parameters = %#v, want %#v", got.Parameters, tc.want)
			}
		})
	}
}

func TestToPolicyNil(t *testing.T) {
	if _, err := policyobject.ToPolicy(nil); err == nil {
		t.Fatal("ToPolicy(nil) returned no error")
	}
}
