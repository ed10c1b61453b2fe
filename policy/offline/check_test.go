package offline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/offline"
)

const policiesDir = "testdata/check/policies"

func TestRunCheckText(t *testing.T) {
	tests := []struct {
		name     string
		paths    []string
		op       policy.Operation
		wantCode int
		want     []string
	}{
		{
			name:     "good manifests pass with a warning",
			paths:    []string{"testdata/check/good"},
			wantCode: 0,
			want: []string{
				"testdata/check/good/nodepools.yaml#2 NodePool/np-heavy: warn [weight-cap] weight 80 is above 50 (field: spec.weight)",
				"checked 3 objects against 3 policies: 0 deny, 1 warn, 0 dryrun, 0 errors",
			},
		},
		{
			name:     "bad manifests fail on deny",
			paths:    []string{"testdata/check/bad"},
			wantCode: 1,
			want: []string{
				"testdata/check/bad/list.json#1 items[0] NodePool/np-listed: deny [cpu-limit-required] NodePool np-listed has no CPU limit (field: spec.limits.cpu)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: deny [cpu-limit-required] NodePool unlimited has no CPU limit (field: spec.limits.cpu)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: dryrun [naming] NodePool unlimited should be named np-*",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: warn [weight-cap] weight 60 is above 50 (field: spec.weight)",
				"checked 3 objects against 3 policies: 2 deny, 1 warn, 1 dryrun, 0 errors",
			},
		},
		{
			name:     "good and bad together",
			paths:    []string{"testdata/check/good/nodepools.yaml", "testdata/check/bad/nodepools.yaml"},
			wantCode: 1,
			want: []string{
				"testdata/check/good/nodepools.yaml#2 NodePool/np-heavy: warn [weight-cap] weight 80 is above 50 (field: spec.weight)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: deny [cpu-limit-required] NodePool unlimited has no CPU limit (field: spec.limits.cpu)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: dryrun [naming] NodePool unlimited should be named np-*",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: warn [weight-cap] weight 60 is above 50 (field: spec.weight)",
				"checked 4 objects against 3 policies: 1 deny, 2 warn, 1 dryrun, 0 errors",
			},
		},
		{
			name:     "DELETE is not matched by the default operations",
			paths:    []string{"testdata/check/bad"},
			op:       policy.OperationDelete,
			wantCode: 0,
			want:     []string{"checked 3 objects against 3 policies: 0 deny, 0 warn, 0 dryrun, 0 errors"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code, err := offline.RunCheck(context.Background(), offline.CheckConfig{PolicyDir: policiesDir, ObjectPaths: tc.paths, Operation: tc.op}, &out)
			if err != nil {
				t.Fatalf("RunCheck: %v", err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d", code, tc.wantCode)
			}
			if got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"); strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("output:\n%s\nwant:\n%s", out.String(), strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestRunCheckJSONFromStdin(t *testing.T) {
	stdin := strings.NewReader(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: unlimited
spec:
  weight: 60
`)
	var out bytes.Buffer
	code, err := offline.RunCheck(context.Background(), offline.CheckConfig{
		PolicyDir: policiesDir, ObjectPaths: []string{"-"}, Stdin: stdin, Output: offline.OutputJSON,
	}, &out)
	if err != nil || code != 1 {
		t.Fatalf("RunCheck = %d, %v; want 1, nil", code, err)
	}
	var rep struct {
		Objects []struct {
			Source     string `json:"source"`
			Kind       string `json:"kind"`
			Name       string `json:"name"`
			Violations []struct {
				Policy  string         `json:"policy"`
				Action  string         `json:"action"`
				Message string         `json:"message"`
				Field   string         `json:"field"`
				Details map[string]any `json:"details"`
			} `json:"violations"`
		} `json:"objects"`
		Summary offline.Summary `json:"summary"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out.String())
	}
	if len(rep.Objects) != 1 || rep.Objects[0].Source != "-#1" || rep.Objects[0].Name != "unlimited" || rep.Objects[0].Kind != "NodePool" {
		t.Fatalf("objects = %+v", rep.Objects)
	}
	vs := rep.Objects[0].Violations
	if len(vs) != 3 {
		t.Fatalf("violations = %+v, want 3", vs)
	}
	if vs[0].Policy != "cpu-limit-required" || vs[0].Action != "Deny" || vs[0].Field != "spec.limits.cpu" {
		t.Errorf("first violation = %+v", vs[0])
	}
	if vs[2].Policy != "weight-cap" || vs[2].Action != "Warn" || vs[2].Details["max"] != 50.0 {
		t.Errorf("last violation = %+v", vs[2])
	}
	if want := (offline.Summary{Objects: 1, Policies: 3, Deny: 1, Warn: 1, DryRun: 1}); rep.Summary != want {
		t.Errorf("summary = %+v, want %+v", rep.Summary, want)
	}
}

func TestCheckErrorsFailTheRun(t *testing.T) {
	ctx := context.Background()
	e := policy.New(policy.Options{})
	broken := policy.Policy{Name: "broken", EnforcementAction: policy.ActionWarn, Rego: "package b\n\nviolation contains {\"msg\": \"x\"} if { count(numbers.range(1, count(input.review.name) * 100000)) > 0 }\n"}
	if err := e.SetPolicies(ctx, []policy.Policy{broken}); err != nil {
		t.Fatal(err)
	}
	objects := []offline.Object{
		{Source: "a.yaml#1", Content: map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "abc"}}},
		{Source: "a.yaml#2", Content: map[string]any{"metadata": map[string]any{"name": "no-kind"}}},
	}
	rep, err := offline.Check(ctx, e, objects, offline.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode() != 1 || rep.Summary.Errors != 2 {
		t.Fatalf("exit %d, summary %+v; want exit 1 with 2 errors", rep.ExitCode(), rep.Summary)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"a.yaml#1 NodePool/abc: error [broken] policy evaluation failed: ",
		"a.yaml#2: error new review: object has no apiVersion or kind",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestCheckUsesObjectsAsInventory(t *testing.T) {
	ctx := context.Background()
	e := policy.New(policy.Options{})
	p := policy.Policy{Name: "class-exists", Match: policy.Match{Kinds: []string{"NodePool"}}, Rego: `package inv

violation contains {"msg": msg, "field": "spec.template.spec.nodeClassRef.name"} if {
	name := input.review.object.spec.template.spec.nodeClassRef.name
	not data.inventory.cluster["karpenter.k8s.aws/v1"].EC2NodeClass[name]
	msg := sprintf("EC2NodeClass %s does not exist", [name])
}
`}
	if err := e.SetPolicies(ctx, []policy.Policy{p}); err != nil {
		t.Fatal(err)
	}
	np := func(name, class string) offline.Object {
		return offline.Object{Source: name, Content: map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"nodeClassRef": map[string]any{"name": class}}}}}}
	}
	class := offline.Object{Source: "class", Content: map[string]any{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": map[string]any{"name": "default"}}}
	rep, err := offline.Check(ctx, e, []offline.Object{np("a", "default"), np("b", "missing"), class}, offline.CheckOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Objects[0].Violations) != 0 || len(rep.Objects[1].Violations) != 1 || rep.Objects[1].Violations[0].Message != "EC2NodeClass missing does not exist" {
		t.Fatalf("report = %+v", rep.Objects)
	}
}

func TestRunCheckConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  offline.CheckConfig
		want string
	}{
		{"bad output", offline.CheckConfig{PolicyDir: policiesDir, ObjectPaths: []string{"testdata/check/good"}, Output: "yaml"}, `output "yaml" is not supported`},
		{"no objects", offline.CheckConfig{PolicyDir: policiesDir}, "no objects to check"},
		{"missing policy dir", offline.CheckConfig{PolicyDir: "testdata/nope", ObjectPaths: []string{"testdata/check/good"}}, "testdata/nope"},
		{"no policies in dir", offline.CheckConfig{PolicyDir: "testdata/check/good", ObjectPaths: []string{"testdata/check/good"}}, "no ProvisioningPolicy found"},
		{"missing object file", offline.CheckConfig{PolicyDir: policiesDir, ObjectPaths: []string{"testdata/check/nope.yaml"}}, "nope.yaml"},
		{"stdin without reader", offline.CheckConfig{PolicyDir: policiesDir, ObjectPaths: []string{"-"}}, "does not read standard input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code, err := offline.RunCheck(context.Background(), tc.cfg, &out)
			if err == nil || code != 1 || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("RunCheck = %d, %v; want exit 1 and an error containing %q", code, err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("wrote a report despite the error: %s", out.String())
			}
		})
	}
}
