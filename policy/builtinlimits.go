package policy

import (
	"fmt"
	"math"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// Bounds on what one builtin call may build. Many builtins build a value far larger than their arguments
// in a single step (numbers.range(1, 100000000) is a 100-million-element array, replace(s, "", s) is
// len(s)² bytes, regex.find_all_string_submatch_n allocates hundreds of bytes per match, floor(1e30000)
// thirty thousand digits, and squaring it again and again doubles them), and a single builtin call cannot be interrupted: neither the evaluation deadline nor
// the memory budget (Options.MemoryBudget) could stop it before it took the operator's memory or the
// webhook's time. Every builtin a policy may call is classified in builtinBounds (builtinclasses.go): those
// whose work grows with their arguments estimate it from the arguments before the call and stop the
// evaluation (an error result, which denies for Deny policies) when it is over one of these bounds.
const (
	// MaxBuiltinArrayLength is the most elements one call may put in an array, set or object it builds
	// (numbers.range, array.concat, split, set and object operations...): far more than any collection in a
	// Kubernetes object (etcd caps an object at 1.5 MB).
	MaxBuiltinArrayLength = 100_000
	// MaxBuiltinStringBytes is the longest string concat, replace, strings.replace_n, sprintf,
	// strings.render_template, regex.replace, json.marshal and the other string builders may return: 4 MiB,
	// above the largest object the apiserver accepts.
	MaxBuiltinStringBytes = 4 << 20
	// MaxBuiltinAllocBytes is the most memory one call may be estimated to allocate (parsing JSON or YAML,
	// regular expression results, encodings): 32 MiB, an eighth of DefaultMemoryBudget, so that no single
	// call can exhaust the per-evaluation budget even when several policies run at once. The bounds are
	// the same for every engine: with a MemoryBudget below 128 MiB, one call may take more than a quarter
	// of it.
	MaxBuiltinAllocBytes = 32 << 20
	// MaxBuiltinNumberDigits is the most decimal digits of a number an arithmetic builtin may read or
	// build. Converting between decimal text and binary is super-linear in the digits, and a short literal
	// such as 1e30000 stands for thirty thousand of them.
	MaxBuiltinNumberDigits = 10_000
	// MaxBuiltinSteps bounds the worst-case work of builtins whose time grows faster than their arguments
	// (a regular expression's program size times the text's length, YAML mappings, array subsets, CIDR
	// pairs): about a second of CPU at most, well within the webhook timeout.
	MaxBuiltinSteps = 100_000_000
	// MaxBuiltinPatternBytes bounds the estimated size of one compiled regular expression or glob. OPA keeps
	// up to 100 compiled patterns of each kind in process-wide caches, so this also bounds what the caches
	// can hold: 1 MiB, far above any pattern a policy writes by hand.
	MaxBuiltinPatternBytes = 1 << 20
)

// Units of BuiltinLimitError.
const (
	// UnitElements counts the elements of an array, set or object.
	UnitElements = "elements"
	// UnitBytes counts the bytes of a string result.
	UnitBytes = "bytes"
	// UnitMemory counts estimated bytes of memory allocated by the call.
	UnitMemory = "bytes of memory"
	// UnitDigits counts decimal digits of a number.
	UnitDigits = "digits"
	// UnitSteps counts estimated elementary steps of work.
	UnitSteps = "steps"
	// UnitPattern counts estimated bytes of a compiled regular expression or glob.
	UnitPattern = "bytes of compiled pattern"
)

// BuiltinLimitError is the error of a builtin call refused because what it would build or do exceeds one
// of the bounds above.
type BuiltinLimitError struct {
	// Builtin is the name of the builtin, such as numbers.range.
	Builtin string
	// Size is the size of the refused result, in Unit; 0 when it is only known to exceed Limit. For the
	// estimated units (UnitMemory, UnitSteps, UnitPattern) it is an upper bound.
	Size int64
	// Limit is the bound that Size exceeds.
	Limit int64
	// Unit is one of UnitElements, UnitBytes, UnitMemory, UnitDigits, UnitSteps and UnitPattern.
	Unit string
}

// Error names the builtin, the size, the bound and the way out.
func (e *BuiltinLimitError) Error() string {
	verb, approx := "build", ""
	switch e.Unit {
	case UnitMemory:
		verb, approx = "allocate", "up to "
	case UnitSteps:
		verb, approx = "take", "up to "
	case UnitPattern:
		verb, approx = "compile", "up to "
	}
	size := approx + fmt.Sprint(e.Size)
	if e.Size <= 0 || e.Size == math.MaxInt64 {
		size = fmt.Sprint("more than ", e.Limit)
	}
	return fmt.Sprintf("%s would %s %s %s; one builtin call may %s at most %d %s: %s",
		e.Builtin, verb, size, e.Unit, verb, e.Limit, e.Unit, builtinLimitFix(e.Builtin))
}

// builtinLimitFix tells the policy author how to stay within the bounds of builtin.
func builtinLimitFix(builtin string) string {
	if b, ok := builtinBounds[builtin]; ok && b.fix != "" {
		return b.fix
	}
	return "build messages from the offending values only, not from whole objects or repeated text"
}

// sizeCheck estimates, from the arguments of one call, what the call would build or do, and returns the
// error for the first bound it exceeds, or nil. It returns nil for arguments of the wrong type: OPA's
// implementation then reports the type error.
type sizeCheck func(operands []*ast.Term) *BuiltinLimitError

func init() {
	// OPA looks builtins up by name in one process-wide table and offers no per-query override for its
	// own builtins (a topdown.Query's WithBuiltins is consulted only for names OPA does not implement), so
	// the bounded versions replace OPA's through topdown.RegisterBuiltinFunc, its documented extension
	// point, for the whole process. The policy engine is the only user of OPA in Joiner, and policy/offline
	// then runs `joiner policy test` with the same bounds.
	replacedBuiltins = map[string]topdown.BuiltinFunc{
		ast.RenderTemplate.Name:   renderTemplateBounded,
		ast.ReachableBuiltin.Name: reachableBounded,
	}
	installBuiltinLimits()
}

// installBuiltinLimits puts the size check of each capped builtin in front of OPA's implementation, or of
// the bounded implementation that replaces it (replacedBuiltins).
func installBuiltinLimits() {
	for name, b := range builtinBounds {
		if b.class != classCapped {
			continue
		}
		orig, decl := topdown.GetBuiltin(name), ast.BuiltinMap[name]
		if impl := replacedBuiltins[name]; impl != nil {
			orig = impl
		}
		if b.check == nil && orig != nil {
			topdown.RegisterBuiltinFunc(name, orig)
			continue
		}
		if orig == nil || decl == nil || b.check == nil {
			continue // not in this OPA version: TestBuiltinInventory reports the stale entry
		}
		topdown.RegisterBuiltinFunc(name, boundedBuiltin(name, decl.Decl.Arity(), b.check, orig))
	}
}

// boundedBuiltin returns orig preceded by check.
func boundedBuiltin(name string, arity int, check sizeCheck, orig topdown.BuiltinFunc) topdown.BuiltinFunc {
	return func(bctx topdown.BuiltinContext, operands []*ast.Term, iter func(*ast.Term) error) error {
		// The evaluator may pass the term receiving the result after the arguments.
		if le := check(operands[:min(arity, len(operands))]); le != nil {
			le.Builtin = name
			return haltLimit(bctx, le)
		}
		return orig(bctx, operands, iter)
	}
}

// haltLimit stops the evaluation with le. A Halt is not a builtin error, which OPA's default mode would
// turn into an undefined expression (letting a policy that hits a bound admit everything): it fails the
// evaluation, so Deny policies fail closed.
func haltLimit(bctx topdown.BuiltinContext, le *BuiltinLimitError) error {
	return topdown.Halt{Err: (&topdown.Error{Code: topdown.BuiltinErr, Message: le.Error(), Location: bctx.Location}).Wrap(le)}
}

// over returns the error for size in unit when it exceeds limit, and nil otherwise.
func over(size, limit int64, unit string) *BuiltinLimitError {
	if size <= limit {
		return nil
	}
	return &BuiltinLimitError{Size: size, Limit: limit, Unit: unit}
}

// elementsLimit, stringLimit, memoryLimit, digitsLimit, stepsLimit and patternLimit return the error for a
// size over the matching bound, or nil.
func elementsLimit(n int64) *BuiltinLimitError { return over(n, MaxBuiltinArrayLength, UnitElements) }
func stringLimit(n int64) *BuiltinLimitError   { return over(n, MaxBuiltinStringBytes, UnitBytes) }
func memoryLimit(n int64) *BuiltinLimitError   { return over(n, MaxBuiltinAllocBytes, UnitMemory) }
func digitsLimit(n int64) *BuiltinLimitError   { return over(n, MaxBuiltinNumberDigits, UnitDigits) }
func stepsLimit(n int64) *BuiltinLimitError    { return over(n, MaxBuiltinSteps, UnitSteps) }
func patternLimit(n int64) *BuiltinLimitError  { return over(n, MaxBuiltinPatternBytes, UnitPattern) }

// firstLimit returns the first non-nil error.
func firstLimit(errs ...*BuiltinLimitError) *BuiltinLimitError {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// satMul and satAdd are multiplication and addition of non-negative sizes that saturate at MaxInt64.
func satMul(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func satAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// stringLen returns the length of t when it is a string.
func stringLen(t *ast.Term) (int64, bool) {
	s, ok := t.Value.(ast.String)
	return int64(len(s)), ok
}

// collectionLen returns the number of elements of an array, set or object.
func collectionLen(v ast.Value) (int64, bool) {
	switch x := v.(type) {
	case *ast.Array:
		return int64(x.Len()), true
	case ast.Set:
		return int64(x.Len()), true
	case ast.Object:
		return int64(x.Len()), true
	}
	return 0, false
}

// linear returns the check of a builtin that allocates at most factor bytes per byte of its string
// arguments, or of the strings in its array arguments (decoders, parsers of certificates and tokens,
// time.format's layout, and builtins whose error quotes an argument).
func linear(factor int64) sizeCheck {
	return func(operands []*ast.Term) *BuiltinLimitError {
		var n int64
		add := func(t *ast.Term) {
			if l, ok := stringLen(t); ok {
				n = satAdd(n, l)
			}
		}
		for _, op := range operands {
			if arr, ok := op.Value.(*ast.Array); ok {
				arr.Foreach(add)
			} else {
				add(op)
			}
		}
		return memoryLimit(satMul(n, factor))
	}
}
