package policy_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/joiner-dev/joiner/policy"
)

// opaDefaultMessages evaluates the policy as OPA does by default (builtin errors are not strict) and
// returns the msg of each violation, sorted: what Gatekeeper and `opa eval` would report.
func opaDefaultMessages(t *testing.T, src string, review policy.Review) []string {
	t.Helper()
	mod, err := policy.ParseRego("spec.rego", src)
	if err != nil {
		t.Fatal(err)
	}
	input := map[string]any{"review": map[string]any{"object": review.Object, "name": review.Name, "operation": string(review.Operation)}, "parameters": map[string]any{}}
	rs, err := rego.New(
		rego.Query(mod.Package.Path.String()+".violation"),
		rego.ParsedModule(mod),
		rego.Input(input),
		rego.SetRegoVersion(ast.RegoV1),
	).Eval(context.Background())
	if err != nil {
		t.Fatalf("OPA: %v", err)
	}
	var msgs []string
	for _, r := range rs {
		for _, ex := range r.Expressions {
			set, _ := ex.Value.([]any)
			for _, v := range set {
				if obj, ok := v.(map[string]any); ok {
					msgs = append(msgs, obj["msg"].(string))
				}
			}
		}
	}
	slices.Sort(msgs)
	return msgs
}

// TestBuiltinErrorsAreUndefined: a builtin that fails makes its expression undefined, as in OPA's default
// mode and Gatekeeper, instead of failing the policy; so the verdicts equal OPA's.
func TestBuiltinErrorsAreUndefined(t *testing.T) {
	tests := []struct {
		name  string
		value string // metadata.name of the reviewed NodePool
		rules string
		want  []string // violation messages, sorted
	}{
		{"to_number fails: the comparison is undefined", "zero",
			`violation contains {"msg": "too many"} if { to_number(input.review.object.metadata.name) > 1 }`, nil},
		{"to_number succeeds", "12",
			`violation contains {"msg": "too many"} if { to_number(input.review.object.metadata.name) > 1 }`, []string{"too many"}},
		{"to_number fails: not catches the undefined value", "zero",
			`violation contains {"msg": "name must be a number"} if { not to_number(input.review.object.metadata.name) }`, []string{"name must be a number"}},
		{"to_number fails: a default rule applies", "zero",
			`default n := -1` + "\n\n" + `n := to_number(input.review.object.metadata.name)` + "\n\n" +
				`violation contains {"msg": sprintf("n is %d", [n])} if { n < 0 }`, []string{"n is -1"}},
		{"time.parse_duration_ns out of range: undefined", "1000000000h",
			`violation contains {"msg": "too long"} if { time.parse_duration_ns(input.review.object.metadata.name) > 720 * 3600 * 1000000000 }`, nil},
		{"time.parse_duration_ns out of range: not catches it", "1000000000h",
			`violation contains {"msg": "not a duration"} if { not time.parse_duration_ns(input.review.object.metadata.name) }`, []string{"not a duration"}},
		{"time.parse_duration_ns succeeds", "1000h",
			`violation contains {"msg": "too long"} if { time.parse_duration_ns(input.review.object.metadata.name) > 720 * 3600 * 1000000000 }`, []string{"too long"}},
		{"one failing element does not hide the others", "x",
			`violation contains {"msg": sprintf("%v", [n])} if { some s in ["1", "two", "3"]; n := to_number(s) }`, []string{"1", "3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := "package errs\n\n" + tc.rules + "\n"
			e := mustEngine(t, policy.Options{}, policy.Policy{Name: "errs", Rego: src})
			review := mustReview(t, policy.OperationCreate, nodePool(tc.value, nil, nil), nil)
			vs, err := e.Evaluate(context.Background(), review)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range vs {
				if v.IsError() {
					t.Fatalf("evaluation error %v; a failing builtin must make its expression undefined", v.Err)
				}
				got = append(got, v.Message)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("violations = %q, want %q", got, tc.want)
			}
			if opa := opaDefaultMessages(t, src, review); !slices.Equal(got, opa) {
				t.Errorf("violations = %q, OPA's default mode gives %q", got, opa)
			}
			if allowed := policy.NewVerdict(vs).Allowed(true); allowed != (len(tc.want) == 0) {
				t.Errorf("Allowed = %v with violations %q", allowed, got)
			}
		})
	}
}

// TestFailuresStillFailClosed: what is not a builtin error still yields an error result, which denies for
// a Deny policy and only reports for Warn and DryRun.
func TestFailuresStillFailClosed(t *testing.T) {
	pkg := func(rules string) string { return "package broken\n\n" + rules + "\n" }
	tests := []struct {
		name    string
		rego    string
		timeout time.Duration
		check   func(error) bool
	}{
		{"deadline overrun", pkg(`violation contains {"msg": "done"} if { count([1 | some i in numbers.range(1, 5000); some j in numbers.range(1, 5000); i != j]) > 0 }`),
			100 * time.Millisecond, func(err error) bool {
				return errors.Is(err, context.DeadlineExceeded) && strings.Contains(err.Error(), "did not finish within 100ms")
			}},
		{"builtin over its size bound", pkg(`violation contains {"msg": "x"} if { count(numbers.range(1, count(input.review.object.metadata.name) * 100000)) > 0 }`),
			0, func(err error) bool { var le *policy.BuiltinLimitError; return errors.As(err, &le) }},
		{"conflicting complete rule", pkg(`x := 1 if { true }` + "\n\n" + `x := 2 if { true }` + "\n\n" + `violation contains {"msg": "x"} if { x > 0 }`),
			0, func(err error) bool { return strings.Contains(err.Error(), "conflict") }},
		{"malformed violation", pkg(`violation contains "not an object" if { true }`),
			0, func(err error) bool { return strings.Contains(err.Error(), "is not an object") }},
		{"compile error", pkg(`violation contains {"msg": "x"} if { undefined_function(1) }`),
			0, func(err error) bool { return strings.Contains(err.Error(), "undefined_function") }},
	}
	for _, tc := range tests {
		for _, action := range []policy.Action{policy.ActionDeny, policy.ActionWarn, policy.ActionDryRun} {
			t.Run(tc.name+"/"+string(action), func(t *testing.T) {
				e := policy.New(policy.Options{EvalTimeout: tc.timeout, Parallelism: 1})
				// A compile error is reported here and the policy stays installed, broken.
				_ = e.SetPolicies(context.Background(), []policy.Policy{{Name: "broken", Rego: tc.rego, EnforcementAction: action}})
				vs, err := e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, nodePool("not-a-number", nil, nil), nil))
				if err != nil {
					t.Fatal(err)
				}
				if len(vs) != 1 || !vs[0].IsError() || !tc.check(vs[0].Err) {
					t.Fatalf("results = %+v, want one error result for %s", vs, tc.name)
				}
				if got, want := policy.NewVerdict(vs).Allowed(true), action != policy.ActionDeny; got != want {
					t.Errorf("Allowed(failClosed) = %v, want %v for a %s policy", got, want, action)
				}
			})
		}
	}
}

// TestBuiltinErrorsAreLoggedAtDebug: the errors that made expressions undefined still reach the debug
// log, so a policy author can tell why a rule never fires.
func TestBuiltinErrorsAreLoggedAtDebug(t *testing.T) {
	for _, verbosity := range []int{0, 1} {
		var lines []string
		log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: verbosity})
		e := mustEngine(t, policy.Options{Logger: log, Parallelism: 1}, policy.Policy{Name: "errs",
			Rego: "package errs\n\nviolation contains {\"msg\": \"x\"} if { to_number(input.review.object.metadata.name) > 1 }\n"})
		vs, err := e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, nodePool("zero", nil, nil), nil))
		if err != nil || len(vs) != 0 {
			t.Fatalf("Evaluate = %+v, %v; want no violation", vs, err)
		}
		logged := strings.Contains(strings.Join(lines, "\n"), `"msg"="builtin error made an expression undefined" "policy"="errs" "error"="spec.rego:3: eval_builtin_error: to_number`)
		if logged != (verbosity >= 1) {
			t.Errorf("verbosity %d: logged = %v; log:\n%s", verbosity, logged, strings.Join(lines, "\n"))
		}
	}
}
