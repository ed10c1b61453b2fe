package offline_test

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/offline"
	"github.com/joiner-dev/joiner/testsupport/filestest"
)

func TestLoadObjects(t *testing.T) {
	dir := filestest.Tree(t, map[string]string{
		"multi.yaml": "# leading comment\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n---\n# only a comment\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n",
		"stream.json": `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "c"}}
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "d"}}`,
		"array.json":     `[{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "e"}}]`,
		"list.yml":       "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod, metadata: {name: f}}\n- {apiVersion: v1, kind: Pod, metadata: {name: g}}\n",
		"sub/deep.yaml":  "apiVersion: v1\nkind: Pod\nmetadata: {name: h}\nspec: {n: 3}\n",
		"ignored.txt":    "not: read",
		".hidden/x.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: hidden}\n",
	})
	tests := []struct {
		name    string
		paths   []string
		stdin   string
		sources []string
		names   []string
	}{
		{"directory, recursively and sorted", []string{dir}, "",
			[]string{"array.json#1", "list.yml#1 items[0]", "list.yml#1 items[1]", "multi.yaml#1", "multi.yaml#2", "stream.json#1", "stream.json#2", "sub/deep.yaml#1"},
			[]string{"e", "f", "g", "a", "b", "c", "d", "h"}},
		{"single file", []string{filepath.Join(dir, "multi.yaml")}, "", []string{"multi.yaml#1", "multi.yaml#2"}, []string{"a", "b"}},
		{"stdin", []string{"-"}, "apiVersion: v1\nkind: Pod\nmetadata: {name: s}\n", []string{"-#1"}, []string{"s"}},
		{"stdin JSON", []string{"-"}, `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "j"}}`, []string{"-#1"}, []string{"j"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := offline.LoadObjects(tc.paths, strings.NewReader(tc.stdin))
			if err != nil {
				t.Fatal(err)
			}
			var sources, names []string
			for _, o := range objs {
				sources = append(sources, strings.TrimPrefix(o.Source, dir+"/"))
				names = append(names, o.Content["metadata"].(map[string]any)["name"].(string))
			}
			if !reflect.DeepEqual(sources, tc.sources) || !reflect.DeepEqual(names, tc.names) {
				t.Errorf("sources %v names %v\nwant %v %v", sources, names, tc.sources, tc.names)
			}
		})
	}
}

func TestLoadObjectsErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"YAML syntax", map[string]string{"a.yaml": "apiVersion: v1\n---\nkind: [unclosed\n"}, "a.yaml#2 (line 3): not valid YAML"},
		{"duplicate key", map[string]string{"a.yaml": "kind: Pod\nkind: Pod\n"}, "a.yaml#1"},
		{"scalar document", map[string]string{"a.yaml": "just a string\n"}, "must be a Kubernetes object"},
		{"bad JSON", map[string]string{"a.json": `{"kind": `}, "a.json: not valid JSON"},
		{"list item not an object", map[string]string{"a.yaml": "kind: List\nitems: [3]\n"}, "items[0] of List is not an object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filestest.Tree(t, tc.files)
			_, err := offline.LoadObjects([]string{dir}, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("LoadObjects error = %v, want %q", err, tc.want)
			}
		})
	}
}

const goodPolicy = `apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata:
  name: %s
  generation: 3
  labels: {owner: platform}
spec:
  enforcementAction: Warn
  match:
    kinds: [Pod]
    operations: [CREATE]
    namespaceSelector:
      matchLabels: {team: a}
  parameters:
    max: 5
    names: [a, b]
  rego: |
    package %s

    violation contains {"msg": "x"} if {
    	input.review.object.spec.n > input.parameters.max
    }
`

func TestLoadPolicies(t *testing.T) {
	dir := filestest.Tree(t, map[string]string{
		"a.yaml": strings.Replace(strings.Replace(goodPolicy, "%s", "pod-cap", 1), "%s", "load.pod_cap", 1),
		"b/minimal.yaml": `apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata: {name: minimal}
spec:
  rego: |
    package load.minimal

    violation contains {"msg": "x"} if { input.review.object.x }
`,
	})
	loaded, err := offline.LoadPolicies(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != 2 {
		t.Fatalf("loaded %d policies, want 2", len(loaded))
	}
	p := loaded[0].Policy
	if p.Name != "pod-cap" || p.Generation != 3 || p.EnforcementAction != policy.ActionWarn ||
		!reflect.DeepEqual(p.Match.Kinds, []string{"Pod"}) || !reflect.DeepEqual(p.Match.Operations, []string{"CREATE"}) ||
		p.Match.NamespaceSelector == nil || p.Match.NamespaceSelector.MatchLabels["team"] != "a" {
		t.Errorf("policy = %+v", p)
	}
	if got := p.Parameters["max"]; got == nil || got.(interface{ String() string }).String() != "5" {
		t.Errorf("parameters.max = %#v, want the number 5", got)
	}
	if loaded[0].RegoLine != 18 || !strings.HasSuffix(loaded[0].Source, "a.yaml#1") {
		t.Errorf("source %s rego line %d, want a.yaml#1 and 18", loaded[0].Source, loaded[0].RegoLine)
	}
	if m := loaded[1].Policy; m.Name != "minimal" || m.Action() != policy.ActionDeny || m.Match.Kinds != nil {
		t.Errorf("minimal policy = %+v", m)
	}
	if got := offline.Policies(loaded); len(got) != 2 || got[1].Name != "minimal" {
		t.Errorf("Policies = %+v", got)
	}
}

func TestLoadPoliciesErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"rego error names the file line", map[string]string{"p.yaml": `# comment
---
apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata: {name: broken}
spec:
  rego: |
    package broken

    violation contains {"msg": "x"} if {
    	input.x ==
    }
`}, []string{"p.yaml#1: policy broken: spec.rego:5:1: rego_parse_error", "line 1 of spec.rego is line 8 of the file"}},
		{"unknown spec field", map[string]string{"p.yaml": "apiVersion: joiner.dev/v1alpha1\nkind: ProvisioningPolicy\nmetadata: {name: x}\nspec:\n  enforcement: Deny\n  rego: x\n"},
			[]string{"p.yaml#1", `unknown field "enforcement"`, "spec fields are rego"}},
		{"wrong apiVersion", map[string]string{"p.yaml": "apiVersion: joiner.dev/v1\nkind: ProvisioningPolicy\nmetadata: {name: x}\nspec: {rego: x}\n"},
			[]string{"apiVersion joiner.dev/v1 is not supported", "joiner.dev/v1alpha1"}},
		{"duplicate names", map[string]string{
			"a.yaml": strings.Replace(strings.Replace(goodPolicy, "%s", "same", 1), "%s", "dup.a", 1),
			"b.yaml": strings.Replace(strings.Replace(goodPolicy, "%s", "same", 1), "%s", "dup.b", 1),
		}, []string{"policy same is also defined in"}},
		{"forbidden builtin", map[string]string{"p.yaml": "apiVersion: joiner.dev/v1alpha1\nkind: ProvisioningPolicy\nmetadata: {name: clock}\nspec:\n  rego: |\n    package clock\n\n    violation contains {\"msg\": \"x\"} if { time.now_ns() > 0 }\n"},
			[]string{"spec.rego:3:", "builtin time.now_ns is not allowed"}},
		{"no policies", map[string]string{"p.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"}, []string{"no ProvisioningPolicy found"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := filestest.Tree(t, tc.files)
			_, err := offline.LoadPolicies(dir)
			if err == nil {
				t.Fatalf("LoadPolicies succeeded, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
