package policy

import (
	"context"
	"slices"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

func TestVirtualCache(t *testing.T) {
	var pool virtualCachePool
	c := pool.acquire()
	a, b := ast.MustParseRef("data.p.a"), ast.MustParseRef("data.p.b")
	steps := []struct {
		name          string
		do            func()
		ref           ast.Ref
		want          *ast.Term
		wantUndefined bool
	}{
		{"miss", func() {}, a, nil, false},
		{"put", func() { c.Put(a, ast.IntNumberTerm(1)) }, a, ast.IntNumberTerm(1), false},
		{"other key still a miss", func() {}, b, nil, false},
		{"undefined", func() { c.Put(b, nil) }, b, nil, true},
		{"new frame hides the old one", func() { c.Push() }, a, nil, false},
		{"put in the new frame", func() { c.Put(a, ast.IntNumberTerm(2)) }, a, ast.IntNumberTerm(2), false},
		{"pop restores the old frame", func() { c.Pop() }, a, ast.IntNumberTerm(1), false},
		{"undefined wins over a later value, as in OPA", func() { c.Put(b, ast.IntNumberTerm(3)) }, b, nil, true},
	}
	for _, s := range steps {
		s.do()
		got, undefined := c.Get(s.ref)
		if undefined != s.wantUndefined || (got == nil) != (s.want == nil) || (got != nil && !got.Equal(s.want)) {
			t.Fatalf("%s: Get(%v) = %v, %v; want %v, %v", s.name, s.ref, got, undefined, s.want, s.wantUndefined)
		}
	}
	keys := c.Keys()
	has := func(want ast.Ref) bool {
		return slices.ContainsFunc(keys, func(r ast.Ref) bool { return r.Equal(want) })
	}
	if len(keys) != 2 || !has(a) || !has(b) {
		t.Errorf("Keys = %v, want %v and %v", keys, a, b)
	}
	// Put must not keep the caller's slice: OPA reuses its buffers.
	buf := ast.MustParseRef("data.p.c")
	c.Put(buf, ast.StringTerm("c"))
	buf[2] = ast.StringTerm("d")
	if got, _ := c.Get(ast.MustParseRef("data.p.c")); got == nil {
		t.Error("entry changed when the caller reused its ref")
	}
	pool.release(c)
	c = pool.acquire()
	if got, undefined := c.Get(a); got != nil || undefined {
		t.Errorf("recycled cache still holds %v", got)
	}
	pool.release(c)
}

// TestVirtualCacheInEvaluation exercises the cache through OPA: complete rules read twice, function calls
// with repeated arguments, and `with`, which pushes and pops frames.
func TestVirtualCacheInEvaluation(t *testing.T) {
	p := Policy{Name: "cache", Rego: `package cache

limit := input.review.object.spec.limit

double(x) := x * 2

scaled := double(limit)

violation contains {"msg": sprintf("%d %d %d", [limit, scaled, double(limit)])} if { limit > 1 }

violation contains {"msg": sprintf("with: %d", [s])} if {
	s := scaled with input.review.object.spec.limit as 100
	limit > 1
}

violation contains {"msg": sprintf("after with: %d", [scaled])} if { limit > 1 }
`}
	e := New(Options{Parallelism: 1})
	if err := e.SetPolicies(context.Background(), []Policy{p}); err != nil {
		t.Fatal(err)
	}
	for range 3 { // reuse recycled caches
		r, _ := NewReview(OperationCreate, map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "x"}, "spec": map[string]any{"limit": 5}}, nil)
		vs, err := e.Evaluate(context.Background(), r)
		if err != nil {
			t.Fatal(err)
		}
		var msgs []string
		for _, v := range vs {
			msgs = append(msgs, v.Message)
		}
		slices.Sort(msgs)
		if want := []string{"5 10 10", "after with: 10", "with: 200"}; !slices.Equal(msgs, want) {
			t.Fatalf("messages %q, want %q", msgs, want)
		}
	}
}
