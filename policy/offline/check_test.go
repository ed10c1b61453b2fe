package offline_test

// `joiner policy check` is admissioncheck's policy-only mode; these tests run the files of testdata/check
// and the objects offline loads through it (package offline_test may import admissioncheck, which
// imports offline).

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/admissioncheck"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/offline"
)

const policiesDir = "testdata/check/policies"

// runPolicyCheck runs `joiner policy check` on cfg: admissioncheck.Run in policy-only mode.
func runPolicyCheck(t *testing.T, cfg admissioncheck.Config) (int, string, error) {
	t.Helper()
	cfg.PolicyOnly = true
	var out bytes.Buffer
	code, err := admissioncheck.Run(context.Background(), cfg, &out)
	return code, out.String(), err
}

// checkObjects checks objects against policies in policy-only mode and returns the report and its text.
func checkObjects(t *testing.T, policies []policy.Policy, objects []offline.Object) (*admissioncheck.Report, string) {
	t.Helper()
	ctx := context.Background()
	checker, err := admissioncheck.New(ctx, admissioncheck.Options{Policies: policies, PolicyOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := checker.Check(ctx, admissioncheck.Pair(objects, nil))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := admissioncheck.WriteReport(&out, admissioncheck.OutputText, rep); err != nil {
		t.Fatal(err)
	}
	return rep, out.String()
}

func TestPolicyCheckText(t *testing.T) {
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
			wantCode: admissioncheck.ExitAllowed,
			want: []string{
				"testdata/check/good/nodepools.yaml#2 NodePool/np-heavy: warn [weight-cap] weight 80 is above 50 (field: spec.weight)",
				"checked 3 objects against 3 policies: 3 allowed, 0 denied, 0 skipped, 1 warnings",
			},
		},
		{
			name:     "bad manifests fail on deny",
			paths:    []string{"testdata/check/bad"},
			wantCode: admissioncheck.ExitDenied,
			want: []string{
				"testdata/check/bad/list.json#1 items[0] NodePool/np-listed: deny [cpu-limit-required] NodePool np-listed has no CPU limit (field: spec.limits.cpu)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: deny [cpu-limit-required] NodePool unlimited has no CPU limit (field: spec.limits.cpu)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: warn [weight-cap] weight 60 is above 50 (field: spec.weight)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: dryrun [naming] NodePool unlimited should be named np-*",
				"checked 3 objects against 3 policies: 1 allowed, 2 denied, 0 skipped, 1 warnings",
			},
		},
		{
			name:     "good and bad together",
			paths:    []string{"testdata/check/good/nodepools.yaml", "testdata/check/bad/nodepools.yaml"},
			wantCode: admissioncheck.ExitDenied,
			want: []string{
				"testdata/check/good/nodepools.yaml#2 NodePool/np-heavy: warn [weight-cap] weight 80 is above 50 (field: spec.weight)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: deny [cpu-limit-required] NodePool unlimited has no CPU limit (field: spec.limits.cpu)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: warn [weight-cap] weight 60 is above 50 (field: spec.weight)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: dryrun [naming] NodePool unlimited should be named np-*",
				"checked 4 objects against 3 policies: 3 allowed, 1 denied, 0 skipped, 2 warnings",
			},
		},
		{
			name:     "UPDATE reviews each object as an update of itself",
			paths:    []string{"testdata/check/bad/nodepools.yaml"},
			op:       policy.OperationUpdate,
			wantCode: admissioncheck.ExitDenied,
			want: []string{
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: deny [cpu-limit-required] NodePool unlimited has no CPU limit (field: spec.limits.cpu)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: warn [weight-cap] weight 60 is above 50 (field: spec.weight)",
				"testdata/check/bad/nodepools.yaml#2 NodePool/unlimited: dryrun [naming] NodePool unlimited should be named np-*",
				"checked 2 objects against 3 policies: 1 allowed, 1 denied, 0 skipped, 1 warnings",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, err := runPolicyCheck(t, admissioncheck.Config{PolicyPath: policiesDir, ObjectPaths: tc.paths, Operation: tc.op})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d", code, tc.wantCode)
			}
			if got := strings.TrimSuffix(out, "\n"); got != strings.Join(tc.want, "\n") {
				t.Errorf("output:\n%s\nwant:\n%s", out, strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestPolicyCheckDeleteIsNotMatchedByDefault: the policies' default operations leave DELETE out, so the
// bad manifests reviewed as deletions break none. The check itself judges creates and updates only and
// refuses DELETE as a usage error.
func TestPolicyCheckDeleteIsNotMatchedByDefault(t *testing.T) {
	ctx := context.Background()
	loaded, err := offline.LoadPolicies(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	e := policy.New(policy.Options{})
	if err := e.SetPolicies(ctx, offline.Policies(loaded)); err != nil {
		t.Fatal(err)
	}
	objects, err := offline.LoadObjects([]string{"testdata/check/bad"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objects {
		review, err := policy.BuildReview(policy.ReviewInput{Operation: policy.OperationDelete, OldObject: o.Content})
		if err != nil {
			t.Fatalf("%s: %v", o.Source, err)
		}
		verdict, err := e.Decide(ctx, review)
		if err != nil {
			t.Fatalf("%s: %v", o.Source, err)
		}
		if all := verdict.All(); len(all) != 0 {
			t.Errorf("%s: DELETE gave %q, want nothing", o.Source, policy.Messages(all))
		}
	}
	code, out, err := runPolicyCheck(t, admissioncheck.Config{PolicyPath: policiesDir, ObjectPaths: []string{"testdata/check/bad"}, Operation: policy.OperationDelete})
	if code != admissioncheck.ExitUsage || err == nil || !strings.Contains(err.Error(), `operation "DELETE" is not supported`) || out != "" {
		t.Fatalf("Run with DELETE = %d, %v, output %q; want a usage error and no report", code, err, out)
	}
}

func TestPolicyCheckJSONFromStdin(t *testing.T) {
	const manifest = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: unlimited
spec:
  weight: 60
`
	code, out, err := runPolicyCheck(t, admissioncheck.Config{
		PolicyPath: policiesDir, ObjectPaths: []string{"-"}, Stdin: strings.NewReader(manifest), Output: admissioncheck.OutputJSON,
	})
	if err != nil || code != admissioncheck.ExitDenied {
		t.Fatalf("Run = %d, %v; want %d, nil", code, err, admissioncheck.ExitDenied)
	}
	var rep admissioncheck.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("output is not JSON: %v\n%s", err, out)
	}
	if len(rep.Objects) != 1 || rep.Objects[0].Source != "-#1" || rep.Objects[0].Name != "unlimited" || rep.Objects[0].Kind != "NodePool" {
		t.Fatalf("objects = %+v", rep.Objects)
	}
	ps := rep.Objects[0].Problems
	want := []admissioncheck.Problem{
		{Action: admissioncheck.ActionDeny, By: admissioncheck.ByPolicy, Policy: "cpu-limit-required", Field: "spec.limits.cpu",
			Message: "[cpu-limit-required] NodePool unlimited has no CPU limit (field: spec.limits.cpu)"},
		{Action: admissioncheck.ActionWarn, By: admissioncheck.ByPolicy, Policy: "weight-cap", Field: "spec.weight",
			Message: "[weight-cap] weight 60 is above 50 (field: spec.weight)"},
		{Action: admissioncheck.ActionDryRun, By: admissioncheck.ByPolicy, Policy: "naming",
			Message: "[naming] NodePool unlimited should be named np-*"},
	}
	if len(ps) != len(want) {
		t.Fatalf("problems = %+v, want %+v", ps, want)
	}
	for i := range want {
		if ps[i] != want[i] {
			t.Errorf("problem %d = %+v, want %+v", i, ps[i], want[i])
		}
	}
	if want := (admissioncheck.Summary{Objects: 1, Policies: 3, Denied: 1, Warnings: 1}); rep.Summary != want {
		t.Errorf("summary = %+v, want %+v", rep.Summary, want)
	}
}

// TestPolicyDetails: a violation's details reach the verdict the check reads (the JSON report carries
// the line, the policy and the field, not the details).
func TestPolicyDetails(t *testing.T) {
	ctx := context.Background()
	loaded, err := offline.LoadPolicies(policiesDir)
	if err != nil {
		t.Fatal(err)
	}
	e := policy.New(policy.Options{})
	if err := e.SetPolicies(ctx, offline.Policies(loaded)); err != nil {
		t.Fatal(err)
	}
	np := map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "unlimited"},
		"spec": map[string]any{"weight": 60}}
	review, err := policy.BuildReview(policy.ReviewInput{Operation: policy.OperationCreate, Object: np})
	if err != nil {
		t.Fatal(err)
	}
	verdict, err := e.Decide(ctx, review)
	if err != nil {
		t.Fatal(err)
	}
	ws := verdict.Warnings()
	if len(ws) != 1 || ws[0].Policy != "weight-cap" || ws[0].Action != policy.ActionWarn || detailNumber(ws[0].Details["max"]) != 50 {
		t.Fatalf("warnings = %+v, want weight-cap with details max 50", ws)
	}
}

// detailNumber reads a number of a violation's details, whatever Go type the engine gives it; -1 when it
// is not a number.
func detailNumber(v any) float64 {
	raw, err := json.Marshal(v)
	if err != nil {
		return -1
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return -1
	}
	return f
}

func TestPolicyCheckFailures(t *testing.T) {
	const rego = "package b\n\nviolation contains {\"msg\": \"x\"} if { count(numbers.range(1, count(input.review.name) * 100000)) > 0 }\n"
	objects := []offline.Object{
		{Source: "a.yaml#1", Content: map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "abc"}}},
		{Source: "a.yaml#2", Content: map[string]any{"metadata": map[string]any{"name": "no-kind"}}},
	}
	tests := []struct {
		name       string
		action     policy.Action
		wantDenied int
		want       []string
	}{
		{"a Deny policy that fails refuses the object", policy.ActionDeny, 2, []string{
			"a.yaml#1 NodePool/abc: deny [broken] policy evaluation failed: ",
			"a.yaml#2: error the object has no apiVersion or kind",
		}},
		{"a Warn policy that fails is a warning", policy.ActionWarn, 1, []string{
			"a.yaml#1 NodePool/abc: warn [broken] policy evaluation failed: ",
			"a.yaml#2: error the object has no apiVersion or kind",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			broken := policy.Policy{Name: "broken", EnforcementAction: tc.action, Rego: rego}
			rep, out := checkObjects(t, []policy.Policy{broken}, objects)
			if rep.ExitCode() != admissioncheck.ExitDenied || rep.Summary.Denied != tc.wantDenied {
				t.Fatalf("exit %d, summary %+v; want exit %d with %d denied", rep.ExitCode(), rep.Summary, admissioncheck.ExitDenied, tc.wantDenied)
			}
			for _, want := range tc.want {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func TestPolicyCheckUsesObjectsAsInventory(t *testing.T) {
	p := policy.Policy{Name: "class-exists", Match: policy.Match{Kinds: []string{"NodePool"}}, Rego: `package inv

violation contains {"msg": msg, "field": "spec.template.spec.nodeClassRef.name"} if {
	name := input.review.object.spec.template.spec.nodeClassRef.name
	not data.inventory.cluster["karpenter.k8s.aws/v1"].EC2NodeClass[name]
	msg := sprintf("EC2NodeClass %s does not exist", [name])
}
`}
	np := func(name, class string) offline.Object {
		return offline.Object{Source: name, Content: map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"template": map[string]any{"spec": map[string]any{"nodeClassRef": map[string]any{"name": class}}}}}}
	}
	class := offline.Object{Source: "class", Content: map[string]any{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": map[string]any{"name": "default"}}}
	rep, _ := checkObjects(t, []policy.Policy{p}, []offline.Object{np("a", "default"), np("b", "missing"), class})
	a, b := rep.Objects[0], rep.Objects[1]
	if len(a.Problems) != 0 || !a.Allowed || len(b.Problems) != 1 || b.Allowed ||
		b.Problems[0].Message != "[class-exists] EC2NodeClass missing does not exist (field: spec.template.spec.nodeClassRef.name)" {
		t.Fatalf("report = %+v", rep.Objects)
	}
}

func TestPolicyCheckConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  admissioncheck.Config
		want string
	}{
		{"bad output", admissioncheck.Config{PolicyPath: policiesDir, ObjectPaths: []string{"testdata/check/good"}, Output: "yaml"}, `output "yaml" is not supported`},
		{"no objects", admissioncheck.Config{PolicyPath: policiesDir}, "no manifests to check"},
		{"missing policy dir", admissioncheck.Config{PolicyPath: "testdata/nope", ObjectPaths: []string{"testdata/check/good"}}, "testdata/nope"},
		{"no policies in dir", admissioncheck.Config{PolicyPath: "testdata/check/good", ObjectPaths: []string{"testdata/check/good"}}, "no ProvisioningPolicy found"},
		{"missing object file", admissioncheck.Config{PolicyPath: policiesDir, ObjectPaths: []string{"testdata/check/nope.yaml"}}, "nope.yaml"},
		{"stdin without reader", admissioncheck.Config{PolicyPath: policiesDir, ObjectPaths: []string{"-"}}, "does not read standard input"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, err := runPolicyCheck(t, tc.cfg)
			if err == nil || code != admissioncheck.ExitUsage || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %d, %v; want exit %d and an error containing %q", code, err, admissioncheck.ExitUsage, tc.want)
			}
			if out != "" {
				t.Errorf("wrote a report despite the error: %s", out)
			}
		})
	}
}
