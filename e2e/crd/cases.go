// Package crd checks Joiner's CRDs against a real kube-apiserver: valid manifests are accepted
// and round-trip without drift, invalid ones are rejected with upstream Karpenter's messages,
// defaults are applied by the server, and update rules hold. The cases are YAML files under
// testdata/<crd>/{accept,reject,default,update}/.
package crd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Kind of case, named after its folder.
const (
	Accept  = "accept"
	Reject  = "reject"
	Default = "default"
	Update  = "update"
)

// Case is one YAML test case.
type Case struct {
	// CRD is the folder under testdata the case belongs to (nodepool, nodeclaim, ...).
	CRD string
	// Kind is Accept, Reject, Default or Update.
	Kind string
	// Path is the case's file.
	Path string
	// Objects are the documents of the file: one, or two for an update (original, then update).
	Objects []*unstructured.Unstructured
	// Wants are substrings the apiserver's error must contain (`# want:` lines).
	Wants []string
	// Expects are path=JSON checks on the object read back (`# expect:` lines).
	Expects []Expect
}

// Expect is one `# expect: path=JSON` line of a default case.
type Expect struct {
	Path  string
	Value any
}

// LoadCases reads every case under root, sorted by path.
func LoadCases(root string) ([]Case, error) {
	var cases []Case
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".yaml" {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		parts := strings.Split(rel, string(filepath.Separator))
		if len(parts) != 3 {
			return fmt.Errorf("case %s: want testdata/<crd>/<kind>/<name>.yaml", path)
		}
		c, err := parseCase(path, parts[0], parts[1])
		if err != nil {
			return err
		}
		cases = append(cases, c)
		return nil
	})
	sort.Slice(cases, func(i, j int) bool { return cases[i].Path < cases[j].Path })
	return cases, err
}

func parseCase(path, crd, kind string) (Case, error) {
	c := Case{CRD: crd, Kind: kind, Path: path}
	switch kind {
	case Accept, Reject, Default, Update:
	default:
		return c, fmt.Errorf("case %s: unknown case kind %q (want accept, reject, default or update)", path, kind)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read case: %w", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "# want:"):
			c.Wants = append(c.Wants, strings.TrimSpace(strings.TrimPrefix(line, "# want:")))
		case strings.HasPrefix(line, "# expect:"):
			spec := strings.TrimSpace(strings.TrimPrefix(line, "# expect:"))
			p, v, ok := strings.Cut(spec, "=")
			if !ok {
				return c, fmt.Errorf("case %s: expect line %q needs path=JSON", path, line)
			}
			var val any
			if err := json.Unmarshal([]byte(v), &val); err != nil {
				return c, fmt.Errorf("case %s: expect value %q is not JSON: %w", path, v, err)
			}
			c.Expects = append(c.Expects, Expect{Path: strings.TrimSpace(p), Value: val})
		}
	}
	for _, doc := range splitDocuments(raw) {
		obj := &unstructured.Unstructured{}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return c, fmt.Errorf("case %s: %w", path, err)
		}
		if err := obj.UnmarshalJSON(js); err != nil {
			return c, fmt.Errorf("case %s: %w", path, err)
		}
		c.Objects = append(c.Objects, obj)
	}
	want := 1
	if kind == Update {
		want = 2
	}
	if len(c.Objects) != want {
		return c, fmt.Errorf("case %s: has %d documents, a %s case needs %d", path, len(c.Objects), kind, want)
	}
	if kind == Reject && len(c.Wants) == 0 {
		return c, fmt.Errorf("case %s: a reject case needs at least one `# want:` line", path)
	}
	if kind == Default && len(c.Expects) == 0 {
		return c, fmt.Errorf("case %s: a default case needs at least one `# expect:` line", path)
	}
	return c, nil
}

func splitDocuments(raw []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytes.Split(append([]byte("\n"), raw...), []byte("\n---")) {
		// Strip comment-only and blank content.
		meaningful := false
		for _, l := range strings.Split(string(d), "\n") {
			t := strings.TrimSpace(l)
			if t != "" && !strings.HasPrefix(t, "#") {
				meaningful = true
				break
			}
		}
		if meaningful {
			docs = append(docs, d)
		}
	}
	return docs
}

// Lookup returns the value at a dotted path with optional [i] indexes, such as
// spec.disruption.budgets[0].nodes.
func Lookup(obj map[string]any, path string) (any, error) {
	var cur any = obj
	for _, seg := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(seg, "[")
		if name != "" {
			m, ok := cur.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: %q is not an object", path, name)
			}
			if cur, ok = m[name]; !ok {
				return nil, fmt.Errorf("%s: no field %q", path, name)
			}
		}
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			if !ok {
				return nil, fmt.Errorf("%s: unclosed index", path)
			}
			i, err := strconv.Atoi(idx)
			if err != nil {
				return nil, fmt.Errorf("%s: index %q: %w", path, idx, err)
			}
			l, isList := cur.([]any)
			if !isList || i < 0 || i >= len(l) {
				return nil, fmt.Errorf("%s: no element %d", path, i)
			}
			cur = l[i]
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return cur, nil
}

// Missing returns the paths of want that got lacks or holds with another value: each field a
// user wrote must read back exactly as written.
func Missing(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %v", path, got)}
		}
		var out []string
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, Missing(w[k], g[k], path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %v, got %v", path, w, got)}
		}
		var out []string
		for i := range w {
			out = append(out, Missing(w[i], g[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	default:
		wj, _ := json.Marshal(want)
		gj, _ := json.Marshal(got)
		if !bytes.Equal(wj, gj) {
			return []string{fmt.Sprintf("%s: want %s, got %s", path, wj, gj)}
		}
		return nil
	}
}
