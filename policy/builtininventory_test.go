package policy

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// TestBuiltinInventory: every builtin of the OPA version in go.mod that a policy may call is classified in
// builtinBounds as constant-size or capped, every other one is forbidden (for the network, clock and
// randomness rules, or refused by builtinBounds), and builtinBounds names no builtin this OPA version lacks.
// A new OPA version adding a builtin fails here until it is classified.
func TestBuiltinInventory(t *testing.T) {
	allowed := map[string]bool{}
	for _, b := range Capabilities().Builtins {
		allowed[b.Name] = true
	}
	for _, b := range ast.Builtins {
		bound, classified := builtinBounds[b.Name]
		switch {
		case allowed[b.Name] && !classified:
			t.Errorf("builtin %s is allowed but not classified: add it to builtinBounds as constant (with why its allocation does not grow), capped (with a size check) or refused", b.Name)
		case allowed[b.Name] && bound.class == classRefused:
			t.Errorf("builtin %s is refused by builtinBounds but allowed by Capabilities", b.Name)
		case !allowed[b.Name] && !ForbiddenBuiltin(b.Name):
			t.Errorf("builtin %s is neither allowed nor forbidden", b.Name)
		}
	}
	for name, b := range builtinBounds {
		if _, ok := ast.BuiltinMap[name]; !ok {
			t.Errorf("builtinBounds classifies %s, which this OPA version does not have: remove it", name)
		}
		switch b.class {
		case classConstant:
			if b.why == "" {
				t.Errorf("constant builtin %s: say why its allocation does not grow with its arguments", name)
			}
		case classCapped:
			if b.fix == "" || (b.check == nil && replacedBuiltins[name] == nil) {
				t.Errorf("capped builtin %s needs a size check (or a bounded implementation) and a fix", name)
			}
		case classRefused:
			if !ForbiddenBuiltin(name) || allowed[name] || b.fix == "" {
				t.Errorf("refused builtin %s must be forbidden, absent from the capabilities, and say why", name)
			}
		default:
			t.Errorf("builtin %s has no class", name)
		}
	}
	for name := range allowed {
		if _, ok := builtinProbes[name]; !ok && unprobed[name] == "" {
			t.Errorf("builtin %s has no probe in builtinProbes (nor a reason in unprobed)", name)
		}
	}
}

// TestRefusedBuiltinsExplainThemselves: a policy calling a refused builtin is rejected with the reason.
func TestRefusedBuiltinsExplainThemselves(t *testing.T) {
	for name, b := range builtinBounds {
		if b.class != classRefused {
			continue
		}
		args := make([]string, ast.BuiltinMap[name].Decl.Arity())
		for i := range args {
			args[i] = "input.x"
		}
		src := "package p\n\nviolation contains {\"msg\": \"x\"} if {\n  " + name + "(" + strings.Join(args, ", ") + ")\n}\n"
		err := Validate(Policy{Name: "p", Rego: src})
		if err == nil || !strings.Contains(err.Error(), "builtin "+name+" is not allowed: "+b.fix) {
			t.Errorf("Validate(policy calling %s) = %v, want the refusal with its reason", name, err)
		}
	}
}

// callResult is one direct call of a builtin.
type callResult struct {
	alloc    uint64 // bytes allocated during the call
	duration time.Duration
	err      error
}

// callBuiltin calls the installed implementation of name, as the evaluator would, and measures it.
func callBuiltin(name string, args []*ast.Term) callResult {
	f := topdown.GetBuiltin(name)
	bctx := topdown.BuiltinContext{Context: context.Background(), Location: &ast.Location{}}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	before := ms.TotalAlloc
	start := time.Now()
	err := f(bctx, args, func(*ast.Term) error { return nil })
	d := time.Since(start)
	runtime.ReadMemStats(&ms)
	return callResult{alloc: ms.TotalAlloc - before, duration: d, err: err}
}

// limitError returns the BuiltinLimitError err carries, if any.
func limitError(err error) *BuiltinLimitError {
	var le *BuiltinLimitError
	if errors.As(err, &le) {
		return le
	}
	return nil
}

// sortedNames returns the builtins of class c that have probes, sorted.
func sortedNames(c builtinClass) []string {
	var names []string
	for name, b := range builtinBounds {
		if _, ok := builtinProbes[name]; ok && b.class == c {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// TestConstantBuiltinsDoNotGrow verifies the constant classifications: with arguments sixteen times
// larger, a constant builtin allocates at most a few kilobytes more.
func TestConstantBuiltinsDoNotGrow(t *testing.T) {
	const large, slack = 1 << 20, 64 << 10
	for _, name := range sortedNames(classConstant) {
		for _, p := range builtinProbes[name] {
			hi := min(large, p.limit())
			lo := hi / 16
			smallArgs, largeArgs := p.args(lo), p.args(hi)
			callBuiltin(name, smallArgs) // warm caches (regexps, interned terms)
			s, l := callBuiltin(name, smallArgs), callBuiltin(name, largeArgs)
			if l.alloc > s.alloc+slack {
				t.Errorf("%s (%s): allocates %d bytes with n=%d and %d with n=%d: it grows with its arguments, so classify it capped with a size check",
					name, p.name, s.alloc, lo, l.alloc, hi)
			}
		}
	}
}
