package policy

import (
	"fmt"
	"math/big"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
)

// checkStaticRanges rejects calls to numbers.range and numbers.range_step whose bounds are known when the
// policy is compiled and whose result would exceed MaxBuiltinArrayLength, so that such a policy is refused
// at kubectl apply (the ProvisioningPolicy webhook calls Validate) instead of failing at every evaluation.
// A bound is known when it is a number literal, a constant rule of the module (`n := 100000000`), or a
// local variable of the same rule assigned one of those. mod is the compiled module: the compiler has
// already moved nested calls into expressions of their own and given local variables unique names.
func checkStaticRanges(mod *ast.Module) error {
	consts := constantRules(mod)
	var errs []string
	for _, r := range mod.Rules {
		locals := map[ast.Var]*ast.Term{}
		ambiguous := map[ast.Var]bool{}
		ast.WalkExprs(r, func(e *ast.Expr) bool {
			if v, t, ok := varAssignment(e); ok {
				if prev, seen := locals[v]; seen && !prev.Equal(t) {
					ambiguous[v] = true
				}
				locals[v] = t
			}
			return false
		})
		var resolve func(t *ast.Term) (ast.Number, bool)
		depth := 0
		resolve = func(t *ast.Term) (ast.Number, bool) {
			switch x := t.Value.(type) {
			case ast.Number:
				return x, true
			case ast.Var:
				next, ok := locals[x]
				if !ok || ambiguous[x] || depth > len(locals) {
					return "", false
				}
				depth++
				defer func() { depth-- }()
				return resolve(next)
			case ast.Ref:
				n, ok := consts[x.String()]
				return n, ok
			}
			return "", false
		}
		ast.WalkExprs(r, func(e *ast.Expr) bool {
			if msg := staticRangeError(e, resolve); msg != "" {
				errs = append(errs, msg)
			}
			return false
		})
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}

// staticRangeError returns the error for e when it calls numbers.range or numbers.range_step with bounds
// resolve knows and a result longer than MaxBuiltinArrayLength, and "" otherwise.
func staticRangeError(e *ast.Expr, resolve func(*ast.Term) (ast.Number, bool)) string {
	if !e.IsCall() {
		return ""
	}
	name := e.Operator().String()
	var nargs int
	switch name {
	case ast.NumbersRange.Name:
		nargs = 2
	case ast.NumbersRangeStep.Name:
		nargs = 3
	default:
		return ""
	}
	ops := e.Operands()
	if len(ops) < nargs {
		return ""
	}
	ints := make([]*big.Int, nargs)
	lits := make([]string, nargs)
	for i := range nargs {
		n, ok := resolve(ops[i])
		if !ok {
			return ""
		}
		v, err := builtins.NumberToInt(n)
		if err != nil {
			return ""
		}
		ints[i], lits[i] = v, string(n)
	}
	length, ok := rangeLengthOf(ints)
	if !ok || length.Cmp(big.NewInt(MaxBuiltinArrayLength)) <= 0 {
		return ""
	}
	return locatedError(e.Location, fmt.Sprintf("%s(%s) would build an array of %s numbers; a policy may build at most %d (policy.MaxBuiltinArrayLength), and the engine stops any evaluation that tries: %s",
		name, strings.Join(lits, ", "), length, MaxBuiltinArrayLength, builtinLimitFix(name))).Error()
}

// varAssignment recognises `v := x` and `v = x` (either way round) where x is a number, a variable or a
// reference: the forms a constant reaches a call through once the compiler has rewritten the module.
func varAssignment(e *ast.Expr) (ast.Var, *ast.Term, bool) {
	if !e.IsEquality() && !e.IsAssignment() {
		return "", nil, false
	}
	ops := e.Operands()
	if len(ops) != 2 {
		return "", nil, false
	}
	for _, pair := range [2][2]*ast.Term{{ops[0], ops[1]}, {ops[1], ops[0]}} {
		v, okV := pair[0].Value.(ast.Var)
		if !okV {
			continue
		}
		switch pair[1].Value.(type) {
		case ast.Number, ast.Var, ast.Ref:
			return v, pair[1], true
		}
	}
	return "", nil, false
}

// constantRules maps the full reference (data.<package>.<name>) of each rule of mod that is defined once,
// unconditionally, as a number literal to that number.
func constantRules(mod *ast.Module) map[string]ast.Number {
	count := map[string]int{}
	values := map[string]ast.Number{}
	for _, r := range mod.Rules {
		ref := mod.Package.Path.Extend(r.Head.Ref()).String()
		count[ref]++
		if r.Head.Value == nil || len(r.Head.Args) > 0 || r.Else != nil || !trivialBody(r.Body) {
			continue
		}
		n, ok := r.Head.Value.Value.(ast.Number)
		if !ok {
			continue
		}
		values[ref] = n
	}
	for ref := range values {
		if count[ref] != 1 {
			delete(values, ref)
		}
	}
	return values
}

// trivialBody reports whether b is the body `true` the parser gives a rule written without one.
func trivialBody(b ast.Body) bool {
	if len(b) != 1 {
		return false
	}
	t, ok := b[0].Terms.(*ast.Term)
	return ok && t.Value.Compare(ast.Boolean(true)) == 0
}
