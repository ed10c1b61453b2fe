package policy

import (
	"strings"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Estimated bytes allocated per element of a result: a string element is a Term, its boxed value and a
// slot in the array (measured at 56 bytes for split); set and object elements add hash table entries.
const (
	elementBytes = 64
	entryBytes   = 160
)

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

// stringOperands returns the first n operands as strings, and false when one of them is not a
// string (its builtin then fails on its own, and is not bounded).
func stringOperands(operands []*ast.Term, n int) ([]string, bool) {
	out := make([]string, n)
	for i := range out {
		v, ok := operands[i].Value.(ast.String)
		if !ok {
			return nil, false
		}
		out[i] = string(v)
	}
	return out, true
}

// checkReplace bounds replace(s, old, new).
func checkReplace(operands []*ast.Term) *BuiltinLimitError {
	args, ok := stringOperands(operands, 3)
	if !ok {
		return nil
	}
	s, old, repl := args[0], args[1], args[2]
	return stringLimit(replacedLength(s, [][2]string{{old, repl}}))
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

// splitCount returns how many parts strings.Split(s, sep) returns.
func splitCount(s, sep string) int64 {
	if sep == "" {
		return int64(utf8.RuneCountInString(s))
	}
	return int64(strings.Count(s, sep)) + 1
}

// checkSplit bounds split(s, delimiter) by the exact number of parts.
func checkSplit(operands []*ast.Term) *BuiltinLimitError {
	args, ok := stringOperands(operands, 2)
	if !ok {
		return nil
	}
	s, sep := args[0], args[1]
	return elementsLimit(splitCount(s, sep))
}

// checkSplitN bounds strings.split_n(s, delimiter, n): OPA splits the whole string when n is negative.
func checkSplitN(operands []*ast.Term) *BuiltinLimitError {
	args, ok1 := stringOperands(operands, 2)
	n, ok2 := operands[2].Value.(ast.Number)
	if !ok1 || !ok2 {
		return nil
	}
	s, sep := args[0], args[1]
	parts := splitCount(s, sep)
	if limit, ok := n.Int64(); ok && limit >= 0 {
		parts = min(parts, limit+1)
	}
	return elementsLimit(parts)
}

// checkIndexOfN bounds indexof_n(s, search) by the number of (overlapping) occurrences; OPA converts
// non-ASCII strings to runes first, four bytes per character.
func checkIndexOfN(operands []*ast.Term) *BuiltinLimitError {
	args, ok := stringOperands(operands, 2)
	if !ok || len(args[1]) == 0 {
		return nil
	}
	s, search := args[0], args[1]
	var count int64
	for offset := 0; ; count++ {
		i := strings.Index(s[offset:], search)
		if i < 0 {
			break
		}
		offset += i + 1
	}
	if !isASCII(s) || !isASCII(search) {
		// Invalid UTF-8 becomes U+FFFD in runes, which may match where the bytes did not.
		count = max(count, int64(utf8.RuneCountInString(s)))
		if le := memoryLimit(satMul(int64(len(s)+len(search)), 4)); le != nil {
			return le
		}
	}
	return elementsLimit(count)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// checkRunes bounds indexof and substring, which convert their first argument to runes (four bytes per
// character) and copy the result when it, or indexof's search string, is not ASCII.
func checkRunes(operands []*ast.Term) *BuiltinLimitError {
	s, ok := operands[0].Value.(ast.String)
	if !ok {
		return nil
	}
	ascii := isASCII(string(s))
	if search, ok := operands[1].Value.(ast.String); ok && len(operands) == 2 {
		ascii = ascii && isASCII(string(search))
	}
	if ascii {
		return nil
	}
	return memoryLimit(satMul(int64(len(s)), 6))
}

// checkCase bounds upper and lower: each byte may become up to three (an invalid byte becomes U+FFFD).
func checkCase(operands []*ast.Term) *BuiltinLimitError {
	s, ok := operands[0].Value.(ast.String)
	if !ok {
		return nil
	}
	factor := int64(3)
	if !isASCII(string(s)) {
		factor = 6
	}
	return memoryLimit(satMul(int64(len(s)), factor))
}

// checkTemplateString bounds internal.template_string (Rego template strings, $"..."): the parts are
// printed and joined; a part with several values is printed once per value until OPA finds the second.
func checkTemplateString(operands []*ast.Term) *BuiltinLimitError {
	parts, ok := operands[0].Value.(*ast.Array)
	if !ok {
		return nil
	}
	var total int64
	parts.Foreach(func(t *ast.Term) {
		total = satAdd(total, printedPart(t.Value, 2))
	})
	return stringLimit(total)
}

// printedPart returns the printed size of one print or template-string operand: a set stands for its
// possible values, of which at most the first few are printed.
func printedPart(v ast.Value, values int) int64 {
	set, ok := v.(ast.Set)
	if !ok {
		return printedSize(v)
	}
	var n int64
	i := 0
	set.Until(func(t *ast.Term) bool {
		n = satAdd(n, printedSize(t.Value))
		i++
		return i >= values
	})
	return n
}

// checkPrint bounds internal.print, which prints one line per combination of its operands' values: the
// number of lines is the product of the operands' sizes.
func checkPrint(operands []*ast.Term) *BuiltinLimitError {
	parts, ok := operands[0].Value.(*ast.Array)
	if !ok {
		return nil
	}
	lines, width := int64(1), int64(0)
	parts.Foreach(func(t *ast.Term) {
		if set, ok := t.Value.(ast.Set); ok && set.Len() > 0 {
			lines = satMul(lines, int64(set.Len()))
			width = satAdd(width, printedPart(set, set.Len()))
			return
		}
		width = satAdd(width, printedSize(t.Value))
	})
	return stringLimit(satMul(lines, width+1))
}
