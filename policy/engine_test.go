package policy_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/policy"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// regoFor wraps violation rule bodies in a Rego v1 module.
func regoFor(pkg string, rules ...string) string {
	return "package " + pkg + "\n\n" + strings.Join(rules, "\n\n") + "\n"
}

// alwaysViolates is a policy that reports one violation with the given message for every review it matches.
func alwaysViolates(name, msg string) policy.Policy {
	return policy.Policy{
		Name: name,
		Rego: regoFor("test."+strings.ReplaceAll(name, "-", "_"), fmt.Sprintf(`violation contains {"msg": %q} if { true }`, msg)),
	}
}

func nodePool(name string, labels map[string]any, limits map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "karpenter.sh/v1",
		"kind":       "NodePool",
		"metadata":   map[string]any{"name": name, "labels": labels},
		"spec":       map[string]any{"limits": limits},
	}
}

func mustReview(t *testing.T, op policy.Operation, obj, old map[string]any) policy.Review {
	t.Helper()
	r, err := policy.NewReview(op, obj, old)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustEngine(t *testing.T, opts policy.Options, policies ...policy.Policy) *policy.Engine {
	t.Helper()
	e := policy.New(opts)
	if err := e.SetPolicies(context.Background(), policies); err != nil {
		t.Fatalf("SetPolicies: %v", err)
	}
	return e
}

func names(vs []policy.Violation) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.Policy
	}
	return out
}

func TestMatching(t *testing.T) {
	pod := func(ns string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": ns}}
	}
	teamSelector := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	tests := []struct {
		name    string
		match   policy.Match
		review  func(t *testing.T) policy.Review
		matched bool
	}{
		{"empty match applies to every kind on CREATE", policy.Match{},
			func(t *testing.T) policy.Review {
				return mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil)
			}, true},
		{"kind listed", policy.Match{Kinds: []string{"NodeClaim", "NodePool"}},
			func(t *testing.T) policy.Review {
				return mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil)
			}, true},
		{"kind not listed", policy.Match{Kinds: []string{"EC2NodeClass"}},
			func(t *testing.T) policy.Review {
				return mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil)
			}, false},
		{"default operations include UPDATE", policy.Match{},
			func(t *testing.T) policy.Review {
				return mustReview(t, policy.OperationUpdate, nodePool("np", nil, nil), nodePool("np", nil, nil))
			}, true},
		{"default operations exclude DELETE", policy.Match{},
			func(t *testing.T) policy.Review {
				return mustReview(t, policy.OperationDelete, nil, nodePool("np", nil, nil))
			}, false},
		{"DELETE when listed", policy.Match{Operations: []string{"DELETE"}},
			func(t *testing.T) policy.Review {
				return mustReview(t, policy.OperationDelete, nil, nodePool("np", nil, nil))
			}, true},
		{"operation not listed", policy.Match{Operations: []string{"UPDATE"}},
			func(t *testing.T) policy.Review {
				return mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil)
			}, false},
		{"namespace selector matches the Pod's namespace labels", policy.Match{Kinds: []string{"Pod"}, NamespaceSelector: teamSelector},
			func(t *testing.T) policy.Review {
				r := mustReview(t, policy.OperationCreate, pod("team-a"), nil)
				r.NamespaceLabels = map[string]string{"team": "a"}
				return r
			}, true},
		{"namespace selector rejects other namespaces", policy.Match{Kinds: []string{"Pod"}, NamespaceSelector: teamSelector},
			func(t *testing.T) policy.Review {
				r := mustReview(t, policy.OperationCreate, pod("team-b"), nil)
				r.NamespaceLabels = map[string]string{"team": "b"}
				return r
			}, false},
		{"namespace selector is ignored for cluster-scoped kinds", policy.Match{NamespaceSelector: teamSelector},
			func(t *testing.T) policy.Review {
				return mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil)
			}, true},
		{"namespace selector with expressions", policy.Match{Kinds: []string{"Pod"}, NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}}},
		}},
			func(t *testing.T) policy.Review {
				r := mustReview(t, policy.OperationCreate, pod("dev"), nil)
				r.NamespaceLabels = map[string]string{"env": "dev"}
				return r
			}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := alwaysViolates("p", "matched")
			p.Match = tc.match
			e := mustEngine(t, policy.Options{}, p)
			vs, err := e.Evaluate(context.Background(), tc.review(t))
			if err != nil {
				t.Fatal(err)
			}
			if got := len(vs) == 1; got != tc.matched {
				t.Fatalf("matched = %v (violations %v), want %v", got, vs, tc.matched)
			}
		})
	}
}

func TestInputShape(t *testing.T) {
	// The policy returns the whole input as details, so the test sees exactly what Rego sees.
	p := policy.Policy{
		Name:       "echo",
		Rego:       regoFor("test.echo", `violation contains {"msg": "input", "details": input} if { true }`),
		Parameters: map[string]any{"maxCPU": "100", "teams": []any{"a"}},
	}
	e := mustEngine(t, policy.Options{}, p)
	obj := nodePool("np", map[string]any{"joiner.dev/team": "a"}, map[string]any{"cpu": "10"})
	old := nodePool("np", map[string]any{}, map[string]any{"cpu": "5"})
	r := mustReview(t, policy.OperationUpdate, obj, old)
	r.UserInfo = policy.UserInfo{Username: "alice", UID: "u1", Groups: []string{"devs"}, Extra: map[string][]string{"scope": {"x"}}}
	vs, err := e.Evaluate(context.Background(), r)
	if err != nil || len(vs) != 1 {
		t.Fatalf("Evaluate = %v, %v", vs, err)
	}
	want := map[string]any{
		"parameters": map[string]any{"maxCPU": "100", "teams": []any{"a"}},
		"review": map[string]any{
			"object":    obj,
			"oldObject": old,
			"operation": "UPDATE",
			"kind":      map[string]any{"group": "karpenter.sh", "version": "v1", "kind": "NodePool"},
			"name":      "np",
			"namespace": "",
			"userInfo": map[string]any{
				"username": "alice", "uid": "u1", "groups": []any{"devs"},
				"extra": map[string]any{"scope": []any{"x"}},
			},
		},
	}
	if !reflect.DeepEqual(vs[0].Details, want) {
		t.Fatalf("input =\n%#v\nwant\n%#v", vs[0].Details, want)
	}

	// CREATE has a null oldObject and no parameters means an empty object.
	p.Parameters = nil
	e = mustEngine(t, policy.Options{}, p)
	vs, err = e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, obj, nil))
	if err != nil || len(vs) != 1 {
		t.Fatalf("Evaluate = %v, %v", vs, err)
	}
	in := vs[0].Details
	if in["parameters"] == nil || len(in["parameters"].(map[string]any)) != 0 {
		t.Errorf("parameters = %v, want {}", in["parameters"])
	}
	if review := in["review"].(map[string]any); review["oldObject"] != nil || review["operation"] != "CREATE" {
		t.Errorf("oldObject = %v, operation = %v; want null and CREATE", review["oldObject"], review["operation"])
	}
}

func TestEnforcementActions(t *testing.T) {
	tests := []struct {
		action policy.Action
		want   policy.Action
	}{
		{"", policy.ActionDeny},
		{policy.ActionDeny, policy.ActionDeny},
		{policy.ActionWarn, policy.ActionWarn},
		{policy.ActionDryRun, policy.ActionDryRun},
	}
	for _, tc := range tests {
		t.Run(string(tc.want)+"/"+string(tc.action), func(t *testing.T) {
			p := alwaysViolates("p", "bad")
			p.EnforcementAction = tc.action
			e := mustEngine(t, policy.Options{}, p)
			vs, err := e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil))
			if err != nil || len(vs) != 1 {
				t.Fatalf("Evaluate = %v, %v", vs, err)
			}
			if vs[0].Action != tc.want {
				t.Errorf("action = %s, want %s", vs[0].Action, tc.want)
			}
		})
	}
}

func TestViolationFieldsAndFormat(t *testing.T) {
	p := policy.Policy{
		Name: "requirements-check",
		Rego: regoFor("test.fields",
			`violation contains {"msg": "second requirement is bad", "field": "spec.template.spec.requirements[2]", "details": {"key": "x", "n": 2}} if { true }`,
			`violation contains {"msg": "no field"} if { true }`),
	}
	e := mustEngine(t, policy.Options{}, p)
	vs, err := e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]policy.Violation{}
	for _, v := range vs {
		got[v.Message] = v
	}
	tests := []struct {
		msg     string
		field   string
		details map[string]any
		str     string
	}{
		{"second requirement is bad", "spec.template.spec.requirements[2]", map[string]any{"key": "x", "n": json.Number("2")},
			"[requirements-check] second requirement is bad (field: spec.template.spec.requirements[2])"},
		{"no field", "", nil, "[requirements-check] no field"},
	}
	if len(vs) != len(tests) {
		t.Fatalf("got %d violations %v, want %d", len(vs), vs, len(tests))
	}
	for _, tc := range tests {
		v, ok := got[tc.msg]
		if !ok {
			t.Fatalf("violation %q missing from %v", tc.msg, vs)
		}
		if v.Field != tc.field || v.String() != tc.str || v.IsError() {
			t.Errorf("violation = %+v (%q), want field %q string %q", v, v.String(), tc.field, tc.str)
		}
		if !reflect.DeepEqual(v.Details, tc.details) {
			t.Errorf("details = %v, want %v", v.Details, tc.details)
		}
	}
}

func TestMalformedViolationsAreErrors(t *testing.T) {
	tests := []struct {
		name string
		rule string
		want string
	}{
		{"not an object", `violation contains "just a string" if { true }`, "not an object"},
		{"no msg", `violation contains {"message": "x"} if { true }`, `no string "msg"`},
		{"msg not a string", `violation contains {"msg": 3} if { true }`, `no string "msg"`},
		{"field not a string", `violation contains {"msg": "x", "field": ["spec"]} if { true }`, "field must be a string"},
		{"details not an object", `violation contains {"msg": "x", "details": [1]} if { true }`, "details must be an object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := policy.Policy{Name: "bad", Rego: regoFor("test.bad", tc.rule)}
			good := alwaysViolates("good", "fine")
			e := mustEngine(t, policy.Options{}, bad, good)
			vs, err := e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != 2 {
				t.Fatalf("got %v, want one error and one violation", vs)
			}
			if !vs[0].IsError() || vs[0].Policy != "bad" || !strings.Contains(vs[0].Err.Error(), tc.want) {
				t.Errorf("bad policy result = %+v, want an error containing %q", vs[0], tc.want)
			}
			if vs[1].IsError() || vs[1].Message != "fine" {
				t.Errorf("good policy result = %+v, want its violation", vs[1])
			}
		})
	}
}

func TestRuntimeErrorIsolated(t *testing.T) {
	tests := []struct {
		name string
		rego string
		want string
	}{
		{"builtin over its size bound", regoFor("test.rt", `violation contains {"msg": "x"} if { count(numbers.range(1, count(input.review.object.metadata.name) * 100000)) > 1 }`), "numbers.range"},
		{"conflicting complete rule", regoFor("test.rt", `x := 1 if { true }`, `x := 2 if { true }`, `violation contains {"msg": "x"} if { x > 0 }`), "conflict"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, policy.Options{}, policy.Policy{Name: "broken", Rego: tc.rego, EnforcementAction: policy.ActionWarn}, alwaysViolates("ok", "still here"))
			vs, err := e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, nodePool("not-a-number", nil, nil), nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := names(vs); !reflect.DeepEqual(got, []string{"broken", "ok"}) {
				t.Fatalf("results from %v, want broken then ok", got)
			}
			if !vs[0].IsError() || vs[0].Action != policy.ActionWarn || !strings.Contains(vs[0].Err.Error(), tc.want) {
				t.Errorf("broken result = %+v, want a Warn error mentioning %q", vs[0], tc.want)
			}
			if !strings.HasPrefix(vs[0].String(), "[broken] policy evaluation failed: ") {
				t.Errorf("error string = %q", vs[0].String())
			}
			if vs[1].IsError() || vs[1].Message != "still here" {
				t.Errorf("ok result = %+v", vs[1])
			}
		})
	}
}

func TestBrokenPolicyInSet(t *testing.T) {
	broken := policy.Policy{Name: "broken", Rego: "package x\nviolation contains {\"msg\": m} if {", Match: policy.Match{Kinds: []string{"NodePool"}}}
	e := policy.New(policy.Options{})
	err := e.SetPolicies(context.Background(), []policy.Policy{broken, alwaysViolates("ok", "fine")})
	var ce policy.CompileErrors
	if !errors.As(err, &ce) || ce["broken"] == nil || len(ce) != 1 {
		t.Fatalf("SetPolicies error = %v, want CompileErrors for broken only", err)
	}
	vs, err := e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := names(vs); !reflect.DeepEqual(got, []string{"broken", "ok"}) || !vs[0].IsError() || vs[1].IsError() {
		t.Fatalf("results = %+v, want an error for broken and a violation for ok", vs)
	}
	// The broken policy keeps its match: a kind it does not match gets no error.
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "n"}}
	vs, err = e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, pod, nil))
	if err != nil || !reflect.DeepEqual(names(vs), []string{"ok"}) {
		t.Fatalf("Pod results = %+v, %v; want only ok", vs, err)
	}
}

func TestValidate(t *testing.T) {
	valid := regoFor("test.v", `violation contains {"msg": "x"} if { input.review.object.spec.x == 1 }`)
	tests := []struct {
		name string
		p    policy.Policy
		want []string // substrings of the error; none means valid
	}{
		{"valid", policy.Policy{Name: "v", Rego: valid}, nil},
		{"print and trace are allowed", policy.Policy{Name: "v", Rego: regoFor("test.v", `violation contains {"msg": "x"} if { print("hello"); trace("t"); input.x }`)}, nil},
		{"syntax error with line and column", policy.Policy{Name: "v", Rego: "package p\n\nviolation contains {\"msg\": \"x\"} if {\n  input.a ==\n}\n"},
			[]string{"spec.rego:5:1:", "rego_parse_error"}},
		{"compile error with line and column", policy.Policy{Name: "v", Rego: "package p\n\nviolation contains {\"msg\": \"x\"} if {\n  input.a == undefined_thing\n}\n"},
			[]string{"spec.rego:4:3:", "undefined_thing"}},
		{"strict mode: unused variable", policy.Policy{Name: "v", Rego: "package p\n\nviolation contains {\"msg\": \"x\"} if {\n  y := 1\n  input.a\n}\n"},
			[]string{"spec.rego:4:3:", "unused"}},
		{"missing violation rule", policy.Policy{Name: "v", Rego: regoFor("test.v", `deny contains {"msg": "x"} if { input.a }`)},
			[]string{`no rule "violation" in package test.v`}},
		{"violation not a set", policy.Policy{Name: "v", Rego: regoFor("test.v", `violation := {"msg": "x"} if { input.a }`)},
			[]string{"spec.rego:3:1:", "must be a set"}},
		{"violation as a function", policy.Policy{Name: "v", Rego: regoFor("test.v", `violation(x) := {"msg": x} if { input.a }`)},
			[]string{"declared as a function"}},
		{"empty rego", policy.Policy{Name: "v"}, []string{"spec.rego: empty"}},
		{"no name", policy.Policy{Rego: valid}, []string{"metadata.name"}},
		{"bad action", policy.Policy{Name: "v", Rego: valid, EnforcementAction: "Block"}, []string{"spec.enforcementAction", "Deny, Warn or DryRun"}},
		{"bad kind", policy.Policy{Name: "v", Rego: valid, Match: policy.Match{Kinds: []string{"Node"}}}, []string{"spec.match.kinds[0]", `"Node"`}},
		{"bad operation", policy.Policy{Name: "v", Rego: valid, Match: policy.Match{Operations: []string{"CONNECT"}}}, []string{"spec.match.operations[0]"}},
		{"namespace selector without Pods", policy.Policy{Name: "v", Rego: valid, Match: policy.Match{Kinds: []string{"NodePool"}, NamespaceSelector: &metav1.LabelSelector{}}},
			[]string{"spec.match.namespaceSelector", "Pods only"}},
		{"invalid namespace selector", policy.Policy{Name: "v", Rego: valid, Match: policy.Match{Kinds: []string{"Pod"}, NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Sometimes"}}}}},
			[]string{"spec.match.namespaceSelector"}},
		{"parameters not JSON", policy.Policy{Name: "v", Rego: valid, Parameters: map[string]any{"c": make(chan int)}}, []string{"spec.parameters"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := policy.Validate(tc.p)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate = nil, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func TestForbiddenBuiltins(t *testing.T) {
	tests := []struct {
		builtin string
		expr    string
	}{
		{"http.send", `http.send({"method": "GET", "url": "http://example.test"}).status_code == 200`},
		{"net.lookup_ip_addr", `count(net.lookup_ip_addr("example.test")) > 0`},
		{"net.cidr_expand", `count(net.cidr_expand("10.0.0.0/8")) > 0`},
		{"net.cidr_overlap", `net.cidr_overlap("10.0.0.0/8", "10.0.0.1")`},
		{"rand.intn", `rand.intn("seed", 10) > 1`},
		{"uuid.rfc4122", `uuid.rfc4122("seed") != ""`},
		{"time.now_ns", `time.now_ns() > 0`},
		{"opa.runtime", `opa.runtime().env != {}`},
		{"io.jwt.decode_verify", `io.jwt.decode_verify("t", {"secret": "s"})[0]`},
	}
	for _, tc := range tests {
		t.Run(tc.builtin, func(t *testing.T) {
			src := "package p\n\nviolation contains {\"msg\": \"x\"} if {\n  " + tc.expr + "\n}\n"
			err := policy.Validate(policy.Policy{Name: "p", Rego: src})
			if err == nil {
				t.Fatalf("Validate accepted %s", tc.builtin)
			}
			for _, w := range []string{"spec.rego:4:", "builtin " + tc.builtin + " is not allowed"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !policy.ForbiddenBuiltin(tc.builtin) {
				t.Errorf("ForbiddenBuiltin(%q) = false", tc.builtin)
			}
		})
	}
	for _, allowed := range []string{"sprintf", "units.parse", "time.parse_duration_ns", "regex.match", "print", "trace"} {
		if policy.ForbiddenBuiltin(allowed) {
			t.Errorf("ForbiddenBuiltin(%q) = true, want allowed", allowed)
		}
	}
}

// TestNetCIDRBuiltins: the pure net.cidr_* builtins are allowed, so subnet policies on node classes compile
// and evaluate, while the net.* builtins that reach the network or allocate without bound stay forbidden.
func TestNetCIDRBuiltins(t *testing.T) {
	for _, name := range []string{"net.cidr_contains", "net.cidr_contains_matches", "net.cidr_intersects", "net.cidr_is_valid", "net.cidr_merge"} {
		if policy.ForbiddenBuiltin(name) {
			t.Errorf("ForbiddenBuiltin(%q) = true, want allowed", name)
		}
	}
	subnets := policy.Policy{
		Name:  "subnets-in-vpc",
		Match: policy.Match{Kinds: []string{policy.KindEC2NodeClass}},
		Rego: regoFor("test.subnets", `violation contains {"msg": msg, "field": "spec.subnetCIDRs"} if {
	some cidr in input.review.object.spec.subnetCIDRs
	not net.cidr_is_valid(cidr)
	msg := sprintf("%s is not a CIDR", [cidr])
}`, `violation contains {"msg": msg, "field": "spec.subnetCIDRs"} if {
	some cidr in input.review.object.spec.subnetCIDRs
	net.cidr_is_valid(cidr)
	not net.cidr_contains(input.parameters.vpc, cidr)
	msg := sprintf("%s is outside the VPC %s", [cidr, input.parameters.vpc])
}`, `all_valid if {
	every cidr in input.review.object.spec.subnetCIDRs {
		net.cidr_is_valid(cidr)
	}
}`, `violation contains {"msg": "subnets overlap", "field": "spec.subnetCIDRs"} if {
	all_valid
	cidrs := input.review.object.spec.subnetCIDRs
	some i, j
	i < j
	net.cidr_intersects(cidrs[i], cidrs[j])
}`, `violation contains {"msg": sprintf("could be merged into %v", [merged])} if {
	all_valid
	merged := net.cidr_merge(input.review.object.spec.subnetCIDRs)
	count(merged) < count(input.review.object.spec.subnetCIDRs)
	count(net.cidr_contains_matches(input.parameters.vpc, merged)) == count(merged)
}`),
		Parameters: map[string]any{"vpc": "10.0.0.0/16"},
	}
	if err := policy.Validate(subnets); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	e := mustEngine(t, policy.Options{}, subnets)
	class := func(cidrs ...any) map[string]any {
		return map[string]any{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": map[string]any{"name": "c"},
			"spec": map[string]any{"subnetCIDRs": cidrs}}
	}
	tests := []struct {
		name  string
		cidrs []any
		want  []string
	}{
		{"inside the VPC", []any{"10.0.1.0/24", "10.0.4.0/24"}, nil},
		{"outside the VPC", []any{"10.0.1.0/24", "192.168.0.0/24"}, []string{"192.168.0.0/24 is outside the VPC 10.0.0.0/16"}},
		{"not a CIDR", []any{"nope"}, []string{"nope is not a CIDR"}},
		{"overlapping", []any{"10.0.0.0/23", "10.0.1.0/24"}, []string{"subnets overlap", `could be merged into {"10.0.0.0/23"}`}},
		{"adjacent", []any{"10.0.2.0/24", "10.0.3.0/24"}, []string{`could be merged into {"10.0.2.0/23"}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			vs, err := e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, class(tc.cidrs...), nil))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range vs {
				if v.IsError() {
					t.Fatalf("evaluation error: %s", v.String())
				}
				got = append(got, v.Message)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("violations %q, want %q", got, tc.want)
			}
		})
	}

	lookup := policy.Policy{Name: "dns", Rego: regoFor("test.dns", `violation contains {"msg": "x"} if {
	net.cidr_contains("10.0.0.0/8", "10.0.0.1")
	count(net.lookup_ip_addr("example.test")) > 0
}`)}
	err := policy.Validate(lookup)
	if err == nil || !strings.Contains(err.Error(), "spec.rego:5:8: rego_type_error: builtin net.lookup_ip_addr is not allowed: policies may not call network") {
		t.Fatalf("Validate = %v, want net.lookup_ip_addr refused", err)
	}
	if strings.Contains(err.Error(), "net.cidr_contains is not allowed") {
		t.Errorf("Validate refused net.cidr_contains: %v", err)
	}
}

func TestEvaluateRejectsBadReviews(t *testing.T) {
	e := mustEngine(t, policy.Options{}, alwaysViolates("p", "x"))
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name   string
		ctx    context.Context
		review policy.Review
		want   string
	}{
		{"unknown operation", context.Background(), policy.Review{Kind: policy.GroupVersionKind{Kind: "NodePool"}, Operation: "CONNECT"}, "CONNECT"},
		{"no kind", context.Background(), policy.Review{Operation: policy.OperationCreate}, "no kind"},
		{"cancelled context", cancelled, policy.Review{Kind: policy.GroupVersionKind{Kind: "NodePool"}, Operation: policy.OperationCreate}, "context canceled"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Evaluate(tc.ctx, tc.review)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Evaluate error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestNewReview(t *testing.T) {
	np := nodePool("np", nil, nil)
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "web", "namespace": "shop"}}
	tests := []struct {
		name    string
		op      policy.Operation
		obj     map[string]any
		old     map[string]any
		want    policy.Review
		wantErr string
	}{
		{"group kind", policy.OperationCreate, np, nil, policy.Review{Kind: policy.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, Operation: "CREATE", Name: "np", Object: np}, ""},
		{"core group, namespaced", policy.OperationCreate, pod, nil, policy.Review{Kind: policy.GroupVersionKind{Version: "v1", Kind: "Pod"}, Operation: "CREATE", Name: "web", Namespace: "shop", Object: pod}, ""},
		{"delete reads the old object", policy.OperationDelete, nil, np, policy.Review{Kind: policy.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"}, Operation: "DELETE", Name: "np", OldObject: np}, ""},
		{"no object", policy.OperationCreate, nil, nil, policy.Review{}, "no object"},
		{"no kind", policy.OperationCreate, map[string]any{"apiVersion": "v1"}, nil, policy.Review{}, "apiVersion or kind"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := policy.NewReview(tc.op, tc.obj, tc.old)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("NewReview = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestDeadline(t *testing.T) {
	// About 25 million iterations: far longer than the 100ms deadline, and cancellable between steps.
	slow := regoFor("test.slow", `violation contains {"msg": "done"} if { count([1 | some i in numbers.range(1, 5000); some j in numbers.range(1, 5000); i != j]) > 0 }`)
	tests := []struct {
		name        string
		parallelism int
		slowName    string
		fastName    string
	}{
		// Sequential: the fast policy sorts first and finishes before the slow one runs out of time.
		{"sequential", 1, "z-slow", "a-fast"},
		// Parallel: the second worker evaluates the fast policy while the first is stuck on the slow one.
		{"parallel", 2, "a-slow", "b-fast"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := mustEngine(t, policy.Options{EvalTimeout: 100 * time.Millisecond, Parallelism: tc.parallelism},
				policy.Policy{Name: tc.slowName, Rego: slow}, alwaysViolates(tc.fastName, "fast"))
			start := time.Now()
			vs, err := e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil))
			elapsed := time.Since(start)
			if err != nil {
				t.Fatal(err)
			}
			if elapsed > 2*time.Second {
				t.Errorf("Evaluate took %s; the 100ms deadline did not stop the slow policy", elapsed)
			}
			byName := map[string]policy.Violation{}
			for _, v := range vs {
				byName[v.Policy] = v
			}
			s := byName[tc.slowName]
			if !s.IsError() || !errors.Is(s.Err, context.DeadlineExceeded) || !strings.Contains(s.Message, "did not finish within 100ms") {
				t.Errorf("slow result = %+v, want a deadline error", s)
			}
			if f := byName[tc.fastName]; f.IsError() || f.Message != "fast" {
				t.Errorf("fast result = %+v, want its violation", f)
			}
		})
	}
}

func TestInventoryRule(t *testing.T) {
	ctx := context.Background()
	// team CPU cap across NodePools, skipping the reviewed NodePool's own inventory entry.
	p := policy.Policy{
		Name:       "team-cpu",
		Parameters: map[string]any{"cap": 100},
		Rego: regoFor("test.inventory", `violation contains {"msg": msg, "details": {"total": total, "others": others}} if {
	team := input.review.object.metadata.labels.team
	others := {name |
		some name, np in data.inventory.cluster["karpenter.sh/v1"].NodePool
		np.metadata.labels.team == team
		name != input.review.name
	}
	total := input.review.object.spec.limits.cpu + sum([data.inventory.cluster["karpenter.sh/v1"].NodePool[n].spec.limits.cpu | some n in others])
	total > input.parameters.cap
	msg := sprintf("team %s total %d", [team, total])
}`,
			`violation contains {"msg": "class missing"} if {
	input.review.object.spec.nodeClassRef
	not data.inventory.cluster["karpenter.k8s.aws/v1"].EC2NodeClass[input.review.object.spec.nodeClassRef.name]
}`),
	}
	e := mustEngine(t, policy.Options{}, p)
	team := func(t string) map[string]any { return map[string]any{"team": t} }
	withManagedFields := nodePool("a1", team("a"), map[string]any{"cpu": 40})
	withManagedFields["metadata"].(map[string]any)["managedFields"] = []any{map[string]any{"manager": "kubectl"}}
	if err := e.SetInventory(ctx, []map[string]any{
		withManagedFields,
		nodePool("a2", team("a"), map[string]any{"cpu": 30}),
		nodePool("b1", team("b"), map[string]any{"cpu": 90}),
	}); err != nil {
		t.Fatal(err)
	}
	if _, ok := withManagedFields["metadata"].(map[string]any)["managedFields"]; !ok {
		t.Fatal("SetInventory modified the caller's object")
	}
	eval := func(obj map[string]any) []policy.Violation {
		t.Helper()
		vs, err := e.Evaluate(ctx, mustReview(t, policy.OperationCreate, obj, nil))
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	steps := []struct {
		name   string
		change func() error
		review map[string]any
		want   string // message of the single violation, or "" for none
	}{
		{"within cap", nil, nodePool("a3", team("a"), map[string]any{"cpu": 30}), ""},
		{"over cap", nil, nodePool("a3", team("a"), map[string]any{"cpu": 31}), "team a total 101"},
		{"own inventory entry is not double counted", nil, nodePool("a2", team("a"), map[string]any{"cpu": 60}), ""},
		{"upsert raises the total", func() error { return e.UpsertInventory(ctx, nodePool("a4", team("a"), map[string]any{"cpu": 20})) },
			nodePool("a3", team("a"), map[string]any{"cpu": 20}), "team a total 110"},
		{"delete lowers it", func() error { return e.DeleteInventory(ctx, "karpenter.sh/v1", "NodePool", "", "a1") },
			nodePool("a3", team("a"), map[string]any{"cpu": 20}), ""},
		{"deleting a missing object is fine", func() error { return e.DeleteInventory(ctx, "karpenter.sh/v1", "NodePool", "", "nope") },
			nodePool("b2", team("b"), map[string]any{"cpu": 10}), ""},
		{"new group/version creates its parents", func() error {
			return e.UpsertInventory(ctx, map[string]any{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": map[string]any{"name": "default"}})
		}, withClassRef(nodePool("c1", team("c"), map[string]any{"cpu": 1}), "default"), ""},
		{"missing node class", nil, withClassRef(nodePool("c1", team("c"), map[string]any{"cpu": 1}), "other"), "class missing"},
	}
	for _, s := range steps {
		if s.change != nil {
			if err := s.change(); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
		}
		vs := eval(s.review)
		switch {
		case s.want == "" && len(vs) != 0:
			t.Errorf("%s: got %v, want none", s.name, vs)
		case s.want != "" && (len(vs) != 1 || vs[0].Message != s.want):
			t.Errorf("%s: got %v, want %q", s.name, vs, s.want)
		}
	}
	if err := e.UpsertInventory(ctx, map[string]any{"kind": "NodePool"}); err == nil {
		t.Error("UpsertInventory accepted an object without apiVersion and name")
	}
}

func withClassRef(np map[string]any, class string) map[string]any {
	np["spec"].(map[string]any)["nodeClassRef"] = map[string]any{"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": class}
	return np
}

func TestInventoryShape(t *testing.T) {
	ctx := context.Background()
	e := mustEngine(t, policy.Options{}, policy.Policy{
		Name: "dump",
		Rego: regoFor("test.dump", `violation contains {"msg": "inventory", "details": data.inventory} if { true }`),
	})
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "web", "namespace": "shop"}}
	class := map[string]any{"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": map[string]any{"name": "default"}}
	if err := e.SetInventory(ctx, []map[string]any{class}); err != nil {
		t.Fatal(err)
	}
	if err := e.UpsertInventory(ctx, pod); err != nil {
		t.Fatal(err)
	}
	vs, err := e.Evaluate(ctx, mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil))
	if err != nil || len(vs) != 1 {
		t.Fatalf("Evaluate = %v, %v", vs, err)
	}
	want := map[string]any{
		"cluster":   map[string]any{"karpenter.k8s.aws/v1": map[string]any{"EC2NodeClass": map[string]any{"default": class}}},
		"namespace": map[string]any{"shop": map[string]any{"v1": map[string]any{"Pod": map[string]any{"web": pod}}}},
	}
	if !reflect.DeepEqual(vs[0].Details, want) {
		t.Fatalf("data.inventory = %v\nwant %v", vs[0].Details, want)
	}
}

func TestUpsertAndRemovePolicy(t *testing.T) {
	ctx := context.Background()
	e := mustEngine(t, policy.Options{}, alwaysViolates("a", "from a"))
	review := mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil)
	steps := []struct {
		name   string
		change func() error
		want   []string
	}{
		{"add b", func() error { return e.UpsertPolicy(ctx, alwaysViolates("b", "from b")) }, []string{"from a", "from b"}},
		{"replace a", func() error {
			p := alwaysViolates("a", "from a v2")
			p.Generation = 2
			return e.UpsertPolicy(ctx, p)
		}, []string{"from a v2", "from b"}},
		{"warn on a without recompiling", func() error {
			p := alwaysViolates("a", "from a v2")
			p.Generation, p.EnforcementAction = 2, policy.ActionWarn
			return e.UpsertPolicy(ctx, p)
		}, []string{"from a v2", "from b"}},
		{"remove b", func() error { e.RemovePolicy("b"); return nil }, []string{"from a v2"}},
		{"remove unknown", func() error { e.RemovePolicy("zzz"); return nil }, []string{"from a v2"}},
	}
	for _, s := range steps {
		if err := s.change(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		vs, err := e.Evaluate(ctx, review)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, v := range vs {
			got = append(got, v.Message)
		}
		if !reflect.DeepEqual(got, s.want) {
			t.Errorf("%s: messages %v, want %v", s.name, got, s.want)
		}
	}
	vs, _ := e.Evaluate(ctx, review)
	if vs[0].Action != policy.ActionWarn {
		t.Errorf("action after upsert = %s, want Warn", vs[0].Action)
	}
	if got := e.PolicyNames(); !reflect.DeepEqual(got, []string{"a"}) {
		t.Errorf("PolicyNames = %v", got)
	}
	err := e.UpsertPolicy(ctx, policy.Policy{Name: "broken", Rego: "package x"})
	var ce policy.CompileErrors
	if !errors.As(err, &ce) || ce["broken"] == nil {
		t.Errorf("UpsertPolicy(broken) = %v, want CompileErrors", err)
	}
	if err := e.SetPolicies(ctx, []policy.Policy{alwaysViolates("d", "x"), alwaysViolates("d", "y")}); err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Errorf("SetPolicies with a duplicate name = %v", err)
	}
}

// TestAtomicSwap evaluates continuously while the policy set flips between two versions. Every evaluation
// must see exactly one version: all messages from set A or all from set B, never a mix or a partial set.
func TestAtomicSwap(t *testing.T) {
	ctx := context.Background()
	// Each policy also reads data.inventory, which changes during the test too.
	version := func(name, msg string, gen int64) policy.Policy {
		return policy.Policy{Name: name, Generation: gen, Rego: regoFor("test.swap",
			fmt.Sprintf(`violation contains {"msg": %q} if { count(data.inventory.cluster) >= 0 }`, msg))}
	}
	setA := []policy.Policy{version("p1", "A", 1), version("p2", "A", 1), version("p3", "A", 1)}
	setB := []policy.Policy{version("p1", "B", 2), version("p2", "B", 2), version("p3", "B", 2)}
	e := mustEngine(t, policy.Options{Parallelism: 2}, setA...)
	review := mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil)

	stop := make(chan struct{})
	var evaluations, mixed atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				vs, err := e.Evaluate(ctx, review)
				if err != nil {
					t.Error(err)
					return
				}
				evaluations.Add(1)
				if len(vs) != 3 || vs[0].Message != vs[1].Message || vs[1].Message != vs[2].Message {
					mixed.Add(1)
				}
			}
		})
	}
	for i := range 200 {
		set := setA
		if i%2 == 0 {
			set = setB
		}
		if err := e.SetPolicies(ctx, set); err != nil {
			t.Fatal(err)
		}
		if err := e.SetInventory(ctx, []map[string]any{nodePool(fmt.Sprint("inv", i), nil, nil)}); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if evaluations.Load() == 0 {
		t.Fatal("no evaluation ran during the swaps")
	}
	if n := mixed.Load(); n > 0 {
		t.Fatalf("%d of %d evaluations saw a mixed or partial policy set", n, evaluations.Load())
	}
}

func TestVerdict(t *testing.T) {
	boom := errors.New("boom")
	deny := policy.Violation{Policy: "d", Action: policy.ActionDeny, Message: "no", Field: "spec.limits.cpu"}
	warn := policy.Violation{Policy: "w", Action: policy.ActionWarn, Message: "careful"}
	dry := policy.Violation{Policy: "r", Action: policy.ActionDryRun, Message: "noted"}
	denyErr := policy.Violation{Policy: "de", Action: policy.ActionDeny, Message: "policy evaluation failed: boom", Err: boom}
	warnErr := policy.Violation{Policy: "we", Action: policy.ActionWarn, Message: "policy evaluation failed: boom", Err: boom}
	tests := []struct {
		name                   string
		results                []policy.Violation
		allowedOpen, allowedFC bool
		denyLines, warnings    []string
	}{
		{"nothing", nil, true, true, []string{}, []string{}},
		{"deny", []policy.Violation{warn, deny}, false, false, []string{"[d] no (field: spec.limits.cpu)"}, []string{"[w] careful"}},
		{"warn and dry run only", []policy.Violation{warn, dry}, true, true, []string{}, []string{"[w] careful"}},
		{"error of a Deny policy", []policy.Violation{denyErr}, true, false, []string{}, []string{}},
		{"error of a Warn policy", []policy.Violation{warnErr}, true, true, []string{}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := policy.NewVerdict(tc.results)
			if v.Allowed(false) != tc.allowedOpen || v.Allowed(true) != tc.allowedFC {
				t.Errorf("Allowed(open)=%v Allowed(failClosed)=%v, want %v %v", v.Allowed(false), v.Allowed(true), tc.allowedOpen, tc.allowedFC)
			}
			if got := policy.Messages(v.Deny); !reflect.DeepEqual(got, tc.denyLines) {
				t.Errorf("deny lines %q, want %q", got, tc.denyLines)
			}
			if got := policy.Messages(v.Warn); !reflect.DeepEqual(got, tc.warnings) {
				t.Errorf("warnings %q, want %q", got, tc.warnings)
			}
			if n := len(v.Deny) + len(v.Warn) + len(v.DryRun) + len(v.Errors); n != len(tc.results) {
				t.Errorf("verdict holds %d results, want %d", n, len(tc.results))
			}
		})
	}
}

// TestInventoryUpdateDuringSlowEvaluation checks that a policy running up to its deadline holds up neither
// inventory updates nor other evaluations, and that the slow evaluation keeps the inventory it started with.
func TestInventoryUpdateDuringSlowEvaluation(t *testing.T) {
	ctx := context.Background()
	slow := policy.Policy{Name: "slow", Match: policy.Match{Kinds: []string{"NodeClaim"}}, Rego: regoFor("test.slow",
		`violation contains {"msg": sprintf("%d pools", [count(data.inventory.cluster["karpenter.sh/v1"].NodePool)])} if {
	count([1 | some i in numbers.range(1, 4000); some j in numbers.range(1, 4000); i != j]) > 0
}`)}
	counting := policy.Policy{Name: "counting", Match: policy.Match{Kinds: []string{"NodePool"}}, Rego: regoFor("test.counting",
		`violation contains {"msg": sprintf("%d pools", [count(data.inventory.cluster["karpenter.sh/v1"].NodePool)])} if { true }`)}
	e := mustEngine(t, policy.Options{EvalTimeout: 3 * time.Second}, slow, counting)
	if err := e.SetInventory(ctx, []map[string]any{nodePool("a", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	claim := map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": map[string]any{"name": "c"}}
	done := make(chan []policy.Violation)
	go func() {
		vs, _ := e.Evaluate(ctx, mustReview(t, policy.OperationCreate, claim, nil))
		done <- vs
	}()
	time.Sleep(50 * time.Millisecond) // let the slow evaluation start

	start := time.Now()
	if err := e.SetInventory(ctx, []map[string]any{nodePool("a", nil, nil), nodePool("b", nil, nil)}); err != nil {
		t.Fatal(err)
	}
	vs, err := e.Evaluate(ctx, mustReview(t, policy.OperationCreate, nodePool("x", nil, nil), nil))
	if elapsed := time.Since(start); err != nil || elapsed > time.Second {
		t.Fatalf("update and evaluation during a slow policy took %s (err %v); they must not wait for it", elapsed, err)
	}
	if len(vs) != 1 || vs[0].Message != "2 pools" {
		t.Errorf("new evaluation saw %v, want the updated inventory (2 pools)", vs)
	}
	select {
	case slowVs := <-done:
		if len(slowVs) != 1 || slowVs[0].IsError() && !errors.Is(slowVs[0].Err, context.DeadlineExceeded) {
			t.Fatalf("slow evaluation = %v", slowVs)
		}
		if !slowVs[0].IsError() && slowVs[0].Message != "1 pools" {
			t.Errorf("slow evaluation saw %q, want the inventory it started with (1 pools)", slowVs[0].Message)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("slow evaluation did not end")
	}
}

// TestEvaluateSkip: a policy named in Review.Skip is left out even where it matches; the others are
// evaluated as usual.
func TestEvaluateSkip(t *testing.T) {
	e := mustEngine(t, policy.Options{}, alwaysViolates("a", "from a"), alwaysViolates("b", "from b"))
	obj := map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "np"}}
	for _, tc := range []struct {
		name string
		skip map[string]bool
		want []string
	}{
		{"nothing skipped", nil, []string{"a", "b"}},
		{"one skipped", map[string]bool{"a": true}, []string{"b"}},
		{"a name that is no policy", map[string]bool{"c": true}, []string{"a", "b"}},
		{"both skipped", map[string]bool{"a": true, "b": true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mustReview(t, policy.OperationCreate, obj, nil)
			r.Skip = tc.skip
			vs, err := e.Evaluate(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range vs {
				got = append(got, v.Policy)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("policies reported %v, want %v", got, tc.want)
			}
		})
	}
}
