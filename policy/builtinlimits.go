package policy

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"strings"
	"text/template"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
)

// Bounds on what one builtin call may build. A few builtins build a value far larger than their arguments
// in a single step (numbers.range(1, 100000000) is a 100-million-element array, replace(s, "", s) is
// len(s)² bytes), and a single builtin call cannot be interrupted: neither the evaluation deadline nor the
// memory budget (Options.MemoryBudget) could stop it before it took the operator's memory. These builtins
// check the size of their result before building it and stop the evaluation (an error result, which
// denies for Deny policies) when it is over the bound.
const (
	// MaxBuiltinArrayLength is the most elements numbers.range, numbers.range_step and array.concat may
	// return: far more than any collection in a Kubernetes object (etcd caps an object at 1.5 MB).
	MaxBuiltinArrayLength = 100_000
	// MaxBuiltinStringBytes is the longest string concat, replace, strings.replace_n, sprintf and
	// strings.render_template may return: 4 MiB, above the largest object the apiserver accepts.
	MaxBuiltinStringBytes = 4 << 20
)

// BuiltinLimitError is the error of a builtin call refused because its result would exceed
// MaxBuiltinArrayLength or MaxBuiltinStringBytes.
type BuiltinLimitError struct {
	// Builtin is the name of the builtin, such as numbers.range.
	Builtin string
	// Size is the size of the refused result, in Unit; 0 when it is only known to exceed Limit.
	Size int64
	// Limit is the bound that Size exceeds.
	Limit int64
	// Unit is "elements" for arrays and "bytes" for strings.
	Unit string
}

// Error names the builtin, the size, the bound and the way out.
func (e *BuiltinLimitError) Error() string {
	size := fmt.Sprint(e.Size)
	if e.Size <= 0 || e.Size == math.MaxInt64 {
		size = fmt.Sprint("more than ", e.Limit)
	}
	return fmt.Sprintf("%s would build %s %s; one builtin call may build at most %d %s: %s",
		e.Builtin, size, e.Unit, e.Limit, e.Unit, builtinLimitFix(e.Builtin))
}

// builtinLimitFix tells the policy author how to avoid the bound of builtin.
func builtinLimitFix(builtin string) string {
	switch builtin {
	case ast.NumbersRange.Name, ast.NumbersRangeStep.Name:
		return "iterate over the reviewed object's own collections (some x in input.review.object...) instead of a range of numbers, or narrow the range"
	case ast.ArrayConcat.Name:
		return "check the elements of each array separately instead of concatenating them"
	default:
		return "build messages from the offending values only, not from whole objects or repeated text"
	}
}

func init() {
	// OPA looks builtins up by name in one process-wide table and offers no per-query override for its
	// own builtins (a topdown.Query's WithBuiltins is consulted only for names OPA does not implement),
	// so the bounded versions replace OPA's for the whole process. The policy engine is the only user of
	// OPA in Joiner, and policy/offline then runs `joiner policy test` with the same bounds.
	installBuiltinLimits()
}

// installBuiltinLimits puts a size check in front of OPA's implementation of each unbounded builtin, and
// replaces strings.render_template, whose result size is only known once rendered, with one that renders
// into a bounded buffer.
func installBuiltinLimits() {
	checks := map[string]func([]*ast.Term) *BuiltinLimitError{
		ast.NumbersRange.Name:     checkRange,
		ast.NumbersRangeStep.Name: checkRange,
		ast.ArrayConcat.Name:      checkArrayConcat,
		ast.Concat.Name:           checkConcat,
		ast.Replace.Name:          checkReplace,
		ast.ReplaceN.Name:         checkReplaceN,
		ast.Sprintf.Name:          checkSprintf,
	}
	for name, check := range checks {
		orig, decl := topdown.GetBuiltin(name), ast.BuiltinMap[name]
		if orig == nil || decl == nil {
			continue // not in this OPA version: nothing to bound
		}
		arity := decl.Decl.Arity()
		topdown.RegisterBuiltinFunc(name, func(bctx topdown.BuiltinContext, operands []*ast.Term, iter func(*ast.Term) error) error {
			// The evaluator may pass the term receiving the result after the arguments.
			if le := check(operands[:min(arity, len(operands))]); le != nil {
				le.Builtin = name
				return haltLimit(bctx, le)
			}
			return orig(bctx, operands, iter)
		})
	}
	topdown.RegisterBuiltinFunc(ast.RenderTemplate.Name, renderTemplateBounded)
}

// haltLimit stops the evaluation with le. A Halt is not a builtin error, which OPA's default mode would
// turn into an undefined expression (letting a policy that hits a bound admit everything): it fails the
// evaluation, so Deny policies fail closed.
func haltLimit(bctx topdown.BuiltinContext, le *BuiltinLimitError) error {
	return topdown.Halt{Err: (&topdown.Error{Code: topdown.BuiltinErr, Message: le.Error(), Location: bctx.Location}).Wrap(le)}
}

// rangeLength returns the number of elements numbers.range(x, y) (two operands) or numbers.range_step(x,
// y, step) (three) returns, and false when the operands are not integers or the step is not positive:
// OPA's implementation then reports the error.
func rangeLength(operands []*ast.Term) (*big.Int, bool) {
	ints := make([]*big.Int, len(operands))
	for i, op := range operands {
		n, ok := op.Value.(ast.Number)
		if !ok {
			return nil, false
		}
		if v, ok := n.Int64(); ok {
			ints[i] = big.NewInt(v)
			continue
		}
		v, err := builtins.NumberToInt(n)
		if err != nil {
			return nil, false
		}
		ints[i] = v
	}
	return rangeLengthOf(ints)
}

// rangeLengthOf computes the length of the range from ints[0] to ints[1] with the step ints[2] (1 when
// ints has two elements).
func rangeLengthOf(ints []*big.Int) (*big.Int, bool) {
	if len(ints) < 2 {
		return nil, false
	}
	step := big.NewInt(1)
	if len(ints) > 2 {
		step = ints[2]
		if step.Sign() <= 0 {
			return nil, false
		}
	}
	d := new(big.Int).Sub(ints[1], ints[0])
	d.Abs(d)
	d.Quo(d, step)
	return d.Add(d, big.NewInt(1)), true
}

// checkRange bounds numbers.range and numbers.range_step.
func checkRange(operands []*ast.Term) *BuiltinLimitError {
	n, ok := rangeLength(operands)
	if !ok || n.Cmp(big.NewInt(MaxBuiltinArrayLength)) <= 0 {
		return nil
	}
	return &BuiltinLimitError{Size: clampInt64(n), Limit: MaxBuiltinArrayLength, Unit: "elements"}
}

func clampInt64(n *big.Int) int64 {
	if n.IsInt64() {
		return n.Int64()
	}
	return math.MaxInt64
}

// checkArrayConcat bounds array.concat.
func checkArrayConcat(operands []*ast.Term) *BuiltinLimitError {
	a, okA := operands[0].Value.(*ast.Array)
	b, okB := operands[1].Value.(*ast.Array)
	if !okA || !okB {
		return nil
	}
	if n := int64(a.Len()) + int64(b.Len()); n > MaxBuiltinArrayLength {
		return &BuiltinLimitError{Size: n, Limit: MaxBuiltinArrayLength, Unit: "elements"}
	}
	return nil
}

// stringLimit returns the error for a string result of n bytes, or nil when n is within the bound.
func stringLimit(n int64) *BuiltinLimitError {
	if n <= MaxBuiltinStringBytes {
		return nil
	}
	return &BuiltinLimitError{Size: n, Limit: MaxBuiltinStringBytes, Unit: "bytes"}
}

// satMul and satAdd are multiplication and addition of non-negative sizes that saturate at MaxInt64.
func satMul(a, b int64) int64 {
	if a == 0 || b == 0 {
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

// checkConcat bounds concat(delimiter, strings): the delimiter is repeated between every two elements.
func checkConcat(operands []*ast.Term) *BuiltinLimitError {
	sep, ok := operands[0].Value.(ast.String)
	if !ok {
		return nil
	}
	var n, total int64
	valid := true
	add := func(t *ast.Term) {
		s, ok := t.Value.(ast.String)
		if !ok {
			valid = false
			return
		}
		n++
		total = satAdd(total, int64(len(s)))
	}
	switch c := operands[1].Value.(type) {
	case *ast.Array:
		c.Foreach(add)
	case ast.Set:
		c.Foreach(add)
	default:
		return nil
	}
	if !valid || n == 0 {
		return nil
	}
	return stringLimit(satAdd(total, satMul(int64(len(sep)), n-1)))
}

// replacedLength returns an upper bound of the length of s after replacing every occurrence of each old
// string with its new string: each replacement adds len(new)-len(old) bytes, and there are at most
// strings.Count(s, old) of them (len(s)+1 for an empty old string).
func replacedLength(s string, pairs [][2]string) int64 {
	// Cheap bound first: at most len(s)+1 replacements, each adding at most the largest growth.
	var growth int64
	for _, p := range pairs {
		growth = max(growth, int64(len(p[1])-len(p[0])))
	}
	n := int64(len(s))
	if growth <= 0 || satAdd(n, satMul(n+1, growth)) <= MaxBuiltinStringBytes {
		return satAdd(n, satMul(n+1, max(growth, 0)))
	}
	total := n
	for _, p := range pairs {
		g := int64(len(p[1]) - len(p[0]))
		if g <= 0 {
			continue
		}
		count := int64(strings.Count(s, p[0]))
		if p[0] == "" {
			count = n + 1
		}
		total = satAdd(total, satMul(count, g))
	}
	return total
}

// checkReplace bounds replace(s, old, new).
func checkReplace(operands []*ast.Term) *BuiltinLimitError {
	s, ok1 := operands[0].Value.(ast.String)
	old, ok2 := operands[1].Value.(ast.String)
	repl, ok3 := operands[2].Value.(ast.String)
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	return stringLimit(replacedLength(string(s), [][2]string{{string(old), string(repl)}}))
}

// checkReplaceN bounds strings.replace_n(patterns, s).
func checkReplaceN(operands []*ast.Term) *BuiltinLimitError {
	patterns, ok1 := operands[0].Value.(ast.Object)
	s, ok2 := operands[1].Value.(ast.String)
	if !ok1 || !ok2 {
		return nil
	}
	pairs := make([][2]string, 0, patterns.Len())
	valid := true
	patterns.Foreach(func(k, v *ast.Term) {
		ks, okK := k.Value.(ast.String)
		vs, okV := v.Value.(ast.String)
		if !okK || !okV {
			valid = false
			return
		}
		pairs = append(pairs, [2]string{string(ks), string(vs)})
	})
	if !valid {
		return nil
	}
	return stringLimit(replacedLength(string(s), pairs))
}

// fmtMaxWidth is the largest width or precision fmt honours; larger ones print %!(BADWIDTH).
const fmtMaxWidth = 1_000_000

// checkSprintf bounds sprintf(format, args): a width or precision pads one value to up to a million
// characters, and explicit argument indexes ("%[1]s%[1]s...") repeat one value any number of times.
// The bound is the format's length, plus for each verb its width, precision and the printed size of the
// argument it consumes, plus the arguments no verb consumed (fmt appends them as %!(EXTRA ...)).
func checkSprintf(operands []*ast.Term) *BuiltinLimitError {
	format, ok1 := operands[0].Value.(ast.String)
	args, ok2 := operands[1].Value.(*ast.Array)
	if !ok1 || !ok2 {
		return nil
	}
	sizes := make([]int64, args.Len()) // printed sizes, computed when an argument is first used; -1: not yet
	for i := range sizes {
		sizes[i] = -1
	}
	sizeOf := func(i int) int64 {
		if i < 0 || i >= len(sizes) {
			return 0
		}
		if sizes[i] < 0 {
			sizes[i] = printedSize(args.Elem(i).Value)
		}
		return sizes[i]
	}
	total := int64(len(format))
	f := string(format)
	argNum := 0
	reordered := false
	// widthAt parses a width or precision at f[i:]: digits, or '*' taking the next argument.
	widthAt := func(i int) (int64, int) {
		if i < len(f) && f[i] == '*' {
			w := int64(fmtMaxWidth)
			if argNum < args.Len() {
				if n, ok := args.Elem(argNum).Value.(ast.Number); ok {
					if v, ok := n.Int64(); ok && v >= -fmtMaxWidth && v <= fmtMaxWidth {
						w = max(v, -v)
					}
				}
			}
			argNum++
			return w, i + 1
		}
		var w int64
		for i < len(f) && f[i] >= '0' && f[i] <= '9' {
			w = min(w*10+int64(f[i]-'0'), fmtMaxWidth+1)
			i++
		}
		if w > fmtMaxWidth {
			w = 0 // fmt prints %!(BADWIDTH) instead
		}
		return w, i
	}
	// indexAt parses an explicit argument index "[n]" at f[i:].
	indexAt := func(i int) int {
		if i >= len(f) || f[i] != '[' {
			return i
		}
		j := i + 1
		n := 0
		for j < len(f) && f[j] >= '0' && f[j] <= '9' {
			n = min(n*10+int(f[j]-'0'), math.MaxInt32)
			j++
		}
		if j < len(f) && f[j] == ']' {
			argNum, reordered = n-1, true
			return j + 1
		}
		return i
	}
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		for i < len(f) && strings.IndexByte("+-# 0", f[i]) >= 0 {
			i++
		}
		i = indexAt(i)
		width, next := widthAt(i)
		i = next
		var prec int64
		if i < len(f) && f[i] == '.' {
			i = indexAt(i + 1)
			prec, i = widthAt(i)
		}
		i = indexAt(i)
		if i >= len(f) {
			break
		}
		if f[i] == '%' {
			continue
		}
		_, size := utf8.DecodeRuneInString(f[i:])
		i += size - 1
		arg := sizeOf(argNum)
		argNum++
		// A verb prints its argument padded to width, or up to prec digits (%f, %e of a number).
		total = satAdd(total, satAdd(satAdd(width, prec), satAdd(arg, 16)))
		if total > MaxBuiltinStringBytes {
			return stringLimit(total)
		}
	}
	if !reordered {
		for i := max(argNum, 0); i < len(sizes); i++ {
			total = satAdd(total, sizeOf(i)+16)
		}
	}
	return stringLimit(total)
}

// printedSize estimates the length of v as sprintf prints it: strings as they are, numbers as written,
// composites as their Rego text, whose size is the sum of their elements plus punctuation. It stops
// counting once it is past MaxBuiltinStringBytes.
func printedSize(v ast.Value) int64 {
	var n int64
	var walk func(v ast.Value)
	walk = func(v ast.Value) {
		if n > MaxBuiltinStringBytes {
			return
		}
		switch x := v.(type) {
		case ast.String:
			n += int64(len(x)) + 2
		case ast.Number:
			n += int64(len(x))
		case *ast.Array:
			n += 2
			x.Foreach(func(t *ast.Term) { n += 2; walk(t.Value) })
		case ast.Set:
			n += 2
			x.Foreach(func(t *ast.Term) { n += 2; walk(t.Value) })
		case ast.Object:
			n += 2
			x.Foreach(func(k, t *ast.Term) { n += 4; walk(k.Value); walk(t.Value) })
		default:
			n += 8 // true, false, null
		}
	}
	walk(v)
	return n
}

// boundedWriter collects output up to limit bytes and refuses more.
type boundedWriter struct {
	buf      bytes.Buffer
	limit    int
	exceeded bool
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.limit {
		w.exceeded = true
		return 0, fmt.Errorf("output exceeds %d bytes", w.limit)
	}
	return w.buf.Write(p)
}

// renderTemplateBounded is strings.render_template(template, vars) with the result bounded: nested range
// actions multiply the output, so it is rendered into a buffer that refuses to grow past
// MaxBuiltinStringBytes. As OPA's, it renders a Go text/template over the JSON form of vars and prints
// missing values as <undefined>.
func renderTemplateBounded(bctx topdown.BuiltinContext, operands []*ast.Term, iter func(*ast.Term) error) error {
	src, err := builtins.StringOperand(operands[0].Value, 1)
	if err != nil {
		return err
	}
	obj, err := builtins.ObjectOperand(operands[1].Value, 2)
	if err != nil {
		return err
	}
	var vars map[string]any
	if err := ast.As(obj, &vars); err != nil {
		return err
	}
	tmpl, err := template.New("template").Parse(string(src))
	if err != nil {
		return err
	}
	out := &boundedWriter{limit: MaxBuiltinStringBytes}
	if err := tmpl.Execute(out, vars); err != nil {
		if out.exceeded {
			return haltLimit(bctx, &BuiltinLimitError{Builtin: ast.RenderTemplate.Name, Limit: MaxBuiltinStringBytes, Unit: "bytes"})
		}
		return err
	}
	return iter(ast.StringTerm(strings.ReplaceAll(out.buf.String(), "<no value>", "<undefined>")))
}
