package policy_test

import (
	"context"
	"encoding/json"
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
		{"strings.render_template past: ranges that print nothing", `strings.render_template(p.t, {"xs": p.xs})`, map[string]any{"t": "{{range .xs}}{{range $.xs}}{{range $.xs}}{{range $.xs}}{{end}}{{end}}{{end}}{{end}}", "xs": xs}, "", "strings.render_template", policy.UnitSteps},
		{"split within", `concat("|", split(p.s, ","))`, map[string]any{"s": "a,b"}, "a|b", "", ""},
		{"split past", `sprintf("%d", [count(split(p.s, ""))])`, map[string]any{"s": strings.Repeat("a", 200000)}, "", "split", policy.UnitElements},
		{"regex.find_all_string_submatch_n within", `sprintf("%v", [regex.find_all_string_submatch_n("(a)", p.s, -1)])`, map[string]any{"s": "aba"}, `[["a", "a"], ["a", "a"]]`, "", ""},
		{"regex.find_all_string_submatch_n past: the issue's 1.7 GiB", `sprintf("%d", [count(regex.find_all_string_submatch_n("(a)", p.s, -1))])`, map[string]any{"s": big}, "", "regex.find_all_string_submatch_n", policy.UnitMemory},
		{"regex.match past: a huge repetition", `sprintf("%v", [regex.match(p.re, "x")])`, map[string]any{"re": strings.Repeat("[a-z]{1000}", 50)}, "", "regex.match", policy.UnitPattern},
		{"json.marshal_with_options within", `json.marshal_with_options({"a": [p.one]}, {"indent": "  "})`, map[string]any{"one": 1}, "{\n  \"a\": [\n    1\n  ]\n}", "", ""},
		{"json.marshal_with_options past: the issue's 1 MB indent", `json.marshal_with_options({"a": {"b": [1, 2]}}, {"indent": p.s})`, map[string]any{"s": big}, "", "json.marshal_with_options", "bytes"},
		{"json.unmarshal within", `sprintf("%v", [json.unmarshal(p.s)])`, map[string]any{"s": `{"a": [1, 2]}`}, `{"a": [1, 2]}`, "", ""},
		{"json.unmarshal past", `sprintf("%d", [count(json.unmarshal(p.s))])`, map[string]any{"s": "[" + strings.Repeat("0,", 500000) + "0]"}, "", "json.unmarshal", policy.UnitMemory},
		{"yaml.unmarshal past: aliases expanding to a billion nodes", `sprintf("%d", [count(yaml.unmarshal(p.s))])`, map[string]any{"s": yamlAliases(9)}, "", "yaml.unmarshal", policy.UnitMemory},
		{"floor within", `sprintf("%v", [floor(p.n)])`, map[string]any{"n": 2.5}, "2", "", ""},
		{"floor past: 30,000 digits from a short literal", `sprintf("%v", [floor(p.n)])`, map[string]any{"n": json.Number("1e30000")}, "", "floor", policy.UnitDigits},
		{"mul past: squaring a large number", `sprintf("%v", [p.n * p.n])`, map[string]any{"n": json.Number("1e6000")}, "", "mul", policy.UnitDigits},
		{"object.subset past: arrays searched position by position", `sprintf("%v", [object.subset(p.a, p.b)])`, map[string]any{"a": zeros(20000), "b": append(zeros(10000), 1)}, "", "object.subset", policy.UnitSteps},
		{"graph.reachable: a chain OPA's implementation explores in Fibonacci time", `sprintf("%d", [count(graph.reachable(p.g, ["v0"]))])`, map[string]any{"g": chain(100)}, "100", "", ""},
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
			verb := map[string]string{policy.UnitMemory: "allocate", policy.UnitSteps: "take", policy.UnitPattern: "compile"}[tc.unit]
			if verb == "" {
				verb = "build"
			}
			for _, w := range []string{"[bounds] policy evaluation failed: ", tc.builtin + " would " + verb + " ", fmt.Sprintf("at most %d %s", le.Limit, tc.unit)} {
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

// yamlAliases is a YAML document of n levels, each a sequence of ten aliases of the level below.
func yamlAliases(n int) string {
	var b strings.Builder
	b.WriteString("l0: &l0 [a, b, c, d, e, f, g, h, i, j]\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	return b.String()
}

func zeros(n int) []any {
	xs := make([]any, n)
	for i := range xs {
		xs[i] = 0
	}
	return xs
}

// chain is a graph of n vertices where each points to the next two.
func chain(n int) map[string]any {
	g := map[string]any{}
	for i := range n {
		g[fmt.Sprintf("v%d", i)] = []any{fmt.Sprintf("v%d", (i+1)%n), fmt.Sprintf("v%d", (i+2)%n)}
	}
	return g
}
