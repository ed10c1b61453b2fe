package policy

import (
	"context"
	"testing"
)

// TestPreparedQueryReuse checks that unchanged policies keep their prepared query across SetPolicies and
// that a new generation or new Rego recompiles.
func TestPreparedQueryReuse(t *testing.T) {
	ctx := context.Background()
	base := Policy{Name: "p", Generation: 1, Rego: "package p\n\nviolation contains {\"msg\": input.parameters.m} if { true }\n", Parameters: map[string]any{"m": "one"}}
	tests := []struct {
		name   string
		change func(Policy) Policy
		reused bool
	}{
		{"identical", func(p Policy) Policy { return p }, true},
		{"parameters and action only", func(p Policy) Policy {
			p.Parameters = map[string]any{"m": "two"}
			p.EnforcementAction = ActionWarn
			return p
		}, true},
		{"new generation", func(p Policy) Policy { p.Generation = 2; return p }, false},
		{"new rego, same generation", func(p Policy) Policy { p.Rego += "\n# changed\n"; return p }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := New(Options{})
			if err := e.SetPolicies(ctx, []Policy{base}); err != nil {
				t.Fatal(err)
			}
			before := e.set.Load().find("p").query
			next := tc.change(base)
			if err := e.SetPolicies(ctx, []Policy{next}); err != nil {
				t.Fatal(err)
			}
			after := e.set.Load().find("p").query
			if (before == after) != tc.reused {
				t.Fatalf("prepared query reused = %v, want %v", before == after, tc.reused)
			}
			r, _ := NewReview(OperationCreate, map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "x"}}, nil)
			vs, err := e.Evaluate(ctx, r)
			if err != nil || len(vs) != 1 {
				t.Fatalf("Evaluate = %v, %v", vs, err)
			}
			if want := next.Parameters["m"]; vs[0].Message != want || vs[0].Action != next.Action() {
				t.Errorf("violation %+v, want message %v and action %s from the new spec", vs[0], want, next.Action())
			}
		})
	}
}
