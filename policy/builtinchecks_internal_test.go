package policy

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

func TestNumberShape(t *testing.T) {
	tests := []struct {
		in          string
		length, mag int64
		ok          bool
	}{
		{"0", 1, 0, true},
		{"7", 1, 1, true},
		{"-123", 4, 3, true},
		{"123.45", 6, 3, true},
		{"0.05", 4, -1, true},
		{"1e9", 12, 10, true},
		{"1.5E-3", 9, -2, true},
		{"00012", 5, 2, true},
		{"1e999999999", 999999999 + 11, 1000000000, true},
		{"1e-30000", 30000 + 8, -29999, true},
		{"1e", 0, 0, false},
		{".", 0, 0, false},
		{"1e+", 0, 0, false},
	}
	for _, tc := range tests {
		length, mag, ok := numberShape(ast.Number(tc.in))
		if length != tc.length || mag != tc.mag || ok != tc.ok {
			t.Errorf("numberShape(%s) = %d, %d, %v; want %d, %d, %v", tc.in, length, mag, ok, tc.length, tc.mag, tc.ok)
		}
	}
}

// randomValue builds a random JSON-like value of about size nodes, with strings that need escaping.
func randomValue(r *rand.Rand, size int) *ast.Term {
	alphabet := []string{"a", "é", "\x00", "<", "\"", "\\", "\n", "\u2028", "\xff", "𝄞", "\t"}
	if size <= 1 {
		switch r.IntN(5) {
		case 0:
			return ast.NumberTerm(json.Number(fmt.Sprint(r.IntN(1e6) - 5e5)))
		case 1:
			return ast.BooleanTerm(r.IntN(2) == 0)
		case 2:
			return ast.NullTerm()
		}
		var b strings.Builder
		for range r.IntN(12) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		return ast.StringTerm(b.String())
	}
	n := 1 + r.IntN(4)
	ts := make([]*ast.Term, n)
	for i := range ts {
		ts[i] = randomValue(r, size/n)
	}
	switch r.IntN(3) {
	case 0:
		return ast.ArrayTerm(ts...)
	case 1:
		return ast.SetTerm(ts...)
	}
	items := make([][2]*ast.Term, n)
	for i := range items {
		items[i] = ast.Item(ast.StringTerm(fmt.Sprintf("k%d%s", i, alphabet[r.IntN(len(alphabet))])), ts[i])
	}
	return ast.ObjectTerm(items...)
}

// resultLen returns the length of the string builtin returns for args.
func resultLen(t *testing.T, builtin string, args ...*ast.Term) int64 {
	t.Helper()
	var out *ast.Term
	err := topdown.GetBuiltin(builtin)(topdown.BuiltinContext{}, args, func(r *ast.Term) error { out = r; return nil })
	if err != nil {
		t.Fatalf("%s: %v", builtin, err)
	}
	return int64(len(out.Value.(ast.String)))
}

// TestSizeEstimatesBoundResults: the string sizes the checks compute without encoding are at least the
// sizes of the strings OPA builds, for random values full of characters that need escaping.
func TestSizeEstimatesBoundResults(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 300 {
		v := randomValue(r, 1+r.IntN(60))
		if got, want := measureJSON(v.Value, false, 0, 0).n, resultLen(t, "json.marshal", v); got < want {
			t.Errorf("json.marshal(%v): estimated %d bytes, built %d", v, got, want)
		}
		indent, prefix := strings.Repeat(" ", i%5), strings.Repeat("#", i%3)
		opts := ast.ObjectTerm(ast.Item(ast.StringTerm("indent"), ast.StringTerm(indent)), ast.Item(ast.StringTerm("prefix"), ast.StringTerm(prefix)))
		m := measureJSON(v.Value, true, int64(len(prefix)), int64(len(indent)))
		if want := resultLen(t, "json.marshal_with_options", v, opts); m.n < want {
			t.Errorf("json.marshal_with_options(%v, %v): estimated %d bytes, built %d", v, opts, m.n, want)
		}
		if want := resultLen(t, "sprintf", ast.StringTerm("%v"), ast.ArrayTerm(v)); printedSize(v.Value) < want {
			t.Errorf("sprintf(%%v, [%v]): estimated %d bytes, built %d", v, printedSize(v.Value), want)
		}
	}
}

// referenceReachable is graph.reachable by its definition: the vertices with an entry in graph reachable
// from initial through vertices with entries.
func referenceReachable(graph ast.Object, initial []*ast.Term) ast.Set {
	reached := ast.NewSet()
	var visit func(v *ast.Term)
	visit = func(v *ast.Term) {
		edges := graph.Get(v)
		if edges == nil || reached.Contains(v) {
			return
		}
		reached.Add(v)
		each(edges.Value, visit)
	}
	for _, v := range initial {
		visit(v)
	}
	return reached
}

func TestReachableBoundedMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 200 {
		n := 1 + r.IntN(30)
		vertex := func() *ast.Term { return ast.StringTerm(fmt.Sprintf("v%d", r.IntN(n+3))) } // some without entries
		var items [][2]*ast.Term
		for i := range n {
			edges := make([]*ast.Term, r.IntN(4))
			for j := range edges {
				edges[j] = vertex()
			}
			out := ast.ArrayTerm(edges...)
			if r.IntN(2) == 0 {
				out = ast.SetTerm(edges...)
			}
			items = append(items, ast.Item(ast.StringTerm(fmt.Sprintf("v%d", i)), out))
		}
		graph := ast.NewObject(items...)
		initial := []*ast.Term{vertex(), vertex()}
		var got *ast.Term
		err := reachableBounded(topdown.BuiltinContext{}, []*ast.Term{ast.NewTerm(graph), ast.ArrayTerm(initial...)}, func(t *ast.Term) error { got = t; return nil })
		if want := referenceReachable(graph, initial); err != nil || got.Value.Compare(want) != 0 {
			t.Fatalf("graph.reachable(%v, %v) = %v, %v; want %v", graph, initial, got, err, want)
		}
	}
}

func TestYAMLExpansion(t *testing.T) {
	tests := []struct {
		doc          string
		nodes, steps int64
	}{
		{"a: 1\nb: [x, y]\n", 8, 4}, // the document, the mapping, two keys, 1, the sequence and its two items
		{"a: &x [1, 2]\nb: *x\nc: *x\n", 16, 9},
		{"l0: &l0 [a, b]\nl1: &l1 [*l0, *l0]\nl2: [*l1, *l1]\n", 38, 9},
	}
	for _, tc := range tests {
		nodes, steps, ok := yamlExpansion(tc.doc)
		if !ok || nodes != tc.nodes || steps != tc.steps {
			t.Errorf("yamlExpansion(%q) = %d, %d, %v; want %d, %d", tc.doc, nodes, steps, ok, tc.nodes, tc.steps)
		}
	}
	if _, _, ok := yamlExpansion("a: [\n"); ok {
		t.Error("yamlExpansion accepted a document that does not parse")
	}
}
