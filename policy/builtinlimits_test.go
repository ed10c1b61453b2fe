package policy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/policy"
)

func TestValidateRefusesHugeRanges(t *testing.T) {
	body := func(expr string) string {
		return "package mem\n\nviolation contains {\"msg\": \"mem\"} if { " + expr + " }\n"
	}
	tests := []struct {
		name string
		rego string
		want []string // substrings of the error; none means valid
	}{
		{"the issue's policy", body(`count(numbers.range(1, 100000000)) < 0`),
			[]string{"spec.rego:3:", "numbers.range(1, 100000000) would build an array of 100000000 numbers", "at most 100000", "iterate over the reviewed object's own collections"}},
		{"descending", body(`count(numbers.range(100000000, 1)) < 0`), []string{"numbers.range(100000000, 1)", "100000000 numbers"}},
		{"exponent literal", body(`count(numbers.range(0, 1e9)) < 0`), []string{"numbers.range(0, 1e9)", "1000000001 numbers"}},
		{"range_step", body(`count(numbers.range_step(0, 1000000000, 2)) < 0`), []string{"numbers.range_step(0, 1000000000, 2) would build an array of 500000001 numbers"}},
		{"in a comprehension", body(`count([x | some x in numbers.range(1, 200000)]) < 0`), []string{"numbers.range(1, 200000)"}},
		{"through a local variable", body(`n := 100000000; count(numbers.range(1, n)) < 0`), []string{"numbers.range(1, 100000000)"}},
		{"through a constant rule", "package mem\n\nn := 100000000\n\nviolation contains {\"msg\": \"mem\"} if { count(numbers.range(1, n)) < 0 }\n",
			[]string{"spec.rego:5:", "numbers.range(1, 100000000)"}},
		{"one over the bound", body(`count(numbers.range(0, 100000)) < 0`), []string{"100001 numbers"}},
		{"at the bound", body(`count(numbers.range(1, 100000)) < 0`), nil},
		{"a step keeps it small", body(`count(numbers.range_step(1, 100000000, 10000)) < 0`), nil},
		{"bound from the input: decided at evaluation", body(`count(numbers.range(1, input.parameters.n)) < 0`), nil},
		{"a rule with a condition is not a constant", "package mem\n\nn := 100000000 if { input.x }\n\nviolation contains {\"msg\": \"mem\"} if { count(numbers.range(1, n)) < 0 }\n", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := policy.Validate(policy.Policy{Name: "mem", Rego: tc.rego})
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate accepted the policy, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate = %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

// TestBuiltinBounds: each bounded builtin returns OPA's result within the bound, and past it stops the
// evaluation with a BuiltinLimitError (denying, for a Deny policy) before building the value.
func TestBuiltinBounds(t *testing.T) {
	big := strings.Repeat("a", 1<<20)
	large := strings.Repeat("b", 1500000)
	xs := make([]any, 100)
	for i := range xs {
		xs[i] = i
	}
	nested := "{{range .xs}}{{range $.xs}}{{range $.xs}}12345678{{end}}{{end}}{{end}}"
	tests := []struct {
		name    string
		expr    string // the value of msg, over p (input.parameters)
		params  map[string]any
		want    string // the message when within the bound
		builtin string // the refused builtin when past it
		unit    string
	}{
		{"numbers.range within", `sprintf("%v", [numbers.range(1, p.n)])`, map[string]any{"n": 3}, "[1, 2, 3]", "", ""},
		{"numbers.range past", `sprintf("%v", [count(numbers.range(1, p.n))])`, map[string]any{"n": 100000000}, "", "numbers.range", "elements"},
		{"numbers.range_step within", `sprintf("%v", [numbers.range_step(0, p.n, 2)])`, map[string]any{"n": 4}, "[0, 2, 4]", "", ""},
		{"numbers.range_step past", `sprintf("%v", [count(numbers.range_step(0, p.n, 2))])`, map[string]any{"n": 1000000000}, "", "numbers.range_step", "elements"},
		{"array.concat within", `sprintf("%v", [array.concat(numbers.range(1, p.n), numbers.range(1, p.n))])`, map[string]any{"n": 2}, "[1, 2, 1, 2]", "", ""},
		{"array.concat past", `sprintf("%v", [count(array.concat(numbers.range(1, p.n), numbers.range(1, p.n)))])`, map[string]any{"n": 60000}, "", "array.concat", "elements"},
		{"concat within", `concat(p.sep, p.words)`, map[string]any{"sep": ",", "words": []any{"a", "b"}}, "a,b", "", ""},
		{"concat past: the separator repeats", `concat(p.sep, p.words)`, map[string]any{"sep": big, "words": []any{"a", "b", "c", "d", "e", "f"}}, "", "concat", "bytes"},
		{"replace within", `replace(p.s, "b", "x")`, map[string]any{"s": "abcb"}, "axcx", "", ""},
		{"replace past: empty old string", `replace(p.s, "", p.s)`, map[string]any{"s": strings.Repeat("a", 4096)}, "", "replace", "bytes"},
		{"strings.replace_n within", `strings.replace_n({"a": "x", "b": "yy"}, p.s)`, map[string]any{"s": "abc"}, "xyyc", "", ""},
		{"strings.replace_n past", `strings.replace_n({"a": p.s}, p.s)`, map[string]any{"s": strings.Repeat("a", 3000)}, "", "strings.replace_n", "bytes"},
		{"sprintf within", `sprintf(p.f, [1, "a"])`, map[string]any{"f": "%d-%s"}, "1-a", "", ""},
		{"sprintf within: a width", `sprintf("%5d|%-3s|", [p.n, "a"])`, map[string]any{"n": 42}, "   42|a  |", "", ""},
		{"sprintf within: two large arguments printed once each", `sprintf("%s|%s", [p.a, p.b])`, map[string]any{"a": large, "b": large}, large + "|" + large, "", ""},
		{"sprintf past: one argument repeated", `sprintf(p.f, [p.s])`, map[string]any{"f": strings.Repeat("%[1]s", 10), "s": big}, "", "sprintf", "bytes"},
		{"sprintf past: widths", `sprintf(p.f, [1])`, map[string]any{"f": strings.Repeat("%[1]1000000d", 5)}, "", "sprintf", "bytes"},
		{"strings.render_template within", `strings.render_template("{{.a}}-{{.missing}}", {"a": p.a})`, map[string]any{"a": "b"}, "b-<undefined>", "", ""},
		{"strings.render_template past: nested ranges", `strings.render_template(p.t, {"xs": p.xs})`, map[string]any{"t": nested, "xs": xs}, "", "strings.render_template", "bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rego := fmt.Sprintf("package bounds\n\nviolation contains {\"msg\": msg} if {\n\tp := input.parameters\n\tmsg := %s\n}\n", tc.expr)
			e := mustEngine(t, policy.Options{}, policy.Policy{Name: "bounds", Rego: rego, Parameters: tc.params})
			vs, err := e.Evaluate(context.Background(), mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil))
			if err != nil {
				t.Fatal(err)
			}
			if len(vs) != 1 {
				t.Fatalf("results = %+v, want one", vs)
			}
			if tc.builtin == "" {
				if vs[0].IsError() || vs[0].Message != tc.want {
					t.Fatalf("result = %+v, want the message %q", vs[0], tc.want)
				}
				return
			}
			var le *policy.BuiltinLimitError
			if !errors.As(vs[0].Err, &le) || le.Builtin != tc.builtin || le.Unit != tc.unit || (le.Size != 0 && le.Size <= le.Limit) {
				t.Fatalf("result = %+v (error %v), want a BuiltinLimitError for %s in %s", vs[0], vs[0].Err, tc.builtin, tc.unit)
			}
			for _, w := range []string{"[bounds] policy evaluation failed: ", tc.builtin + " would build ", fmt.Sprintf("at most %d %s", le.Limit, tc.unit)} {
				if !strings.Contains(vs[0].String(), w) {
					t.Errorf("message %q does not contain %q", vs[0].String(), w)
				}
			}
			if policy.NewVerdict(vs).Allowed(true) {
				t.Error("a Deny policy stopped by a builtin bound did not deny")
			}
		})
	}
}
