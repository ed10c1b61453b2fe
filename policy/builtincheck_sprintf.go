package policy

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// fmtMaxWidth is the largest width or precision fmt honours; larger ones print %!(BADWIDTH).
const fmtMaxWidth = 1_000_000

// checkSprintf bounds sprintf(format, args): a width or precision pads one value to up to a million
// characters, and explicit argument indexes ("%[1]s%[1]s...") repeat one value any number of times.
// The bound is the format's length, plus for each verb its width, precision and the printed size of the
// argument it consumes, plus the arguments no verb consumed (fmt appends them as %!(EXTRA ...)). A number
// argument longer than MaxBuiltinNumberDigits is refused: sprintf converts integer literals to big.Int,
// which is quadratic in their length.
func checkSprintf(operands []*ast.Term) *BuiltinLimitError {
	format, ok1 := operands[0].Value.(ast.String)
	args, ok2 := operands[1].Value.(*ast.Array)
	if !ok1 || !ok2 {
		return nil
	}
	var long *BuiltinLimitError
	args.Until(func(t *ast.Term) bool {
		if n, ok := t.Value.(ast.Number); ok {
			long = digitsLimit(int64(len(n)))
		}
		return long != nil
	})
	if long != nil {
		return long
	}
	s := &fmtScan{f: string(format), args: args, sizes: make([]int64, args.Len())}
	for i := range s.sizes {
		s.sizes[i] = -1
	}
	return stringLimit(s.total())
}

// fmtScan walks a format string the way fmt does, adding up the widest output each verb can print.
type fmtScan struct {
	f         string
	args      *ast.Array
	sizes     []int64 // printed sizes, computed when an argument is first used; -1: not yet
	argNum    int
	reordered bool
}

// sizeOf returns the printed size of argument i, 0 when there is none.
func (s *fmtScan) sizeOf(i int) int64 {
	if i < 0 || i >= len(s.sizes) {
		return 0
	}
	if s.sizes[i] < 0 {
		s.sizes[i] = printedSize(s.args.Elem(i).Value)
	}
	return s.sizes[i]
}

// widthAt parses a width or precision at f[i:]: digits, or '*' taking the next argument.
func (s *fmtScan) widthAt(i int) (int64, int) {
	f := s.f
	if i < len(f) && f[i] == '*' {
		w := int64(fmtMaxWidth)
		if s.argNum >= 0 && s.argNum < s.args.Len() {
			if n, ok := s.args.Elem(s.argNum).Value.(ast.Number); ok {
				if v, ok := n.Int64(); ok && v >= -fmtMaxWidth && v <= fmtMaxWidth {
					w = max(v, -v)
				}
			}
		}
		s.argNum++
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
func (s *fmtScan) indexAt(i int) int {
	f := s.f
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
		s.argNum, s.reordered = n-1, true
		return j + 1
	}
	return i
}

// total returns the bound of the printed length, stopping once it is past MaxBuiltinStringBytes.
func (s *fmtScan) total() int64 {
	f := s.f
	total := int64(len(f))
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		for i < len(f) && strings.IndexByte("+-# 0", f[i]) >= 0 {
			i++
		}
		i = s.indexAt(i)
		width, next := s.widthAt(i)
		i = next
		var prec int64
		if i < len(f) && f[i] == '.' {
			i = s.indexAt(i + 1)
			prec, i = s.widthAt(i)
		}
		i = s.indexAt(i)
		if i >= len(f) {
			break
		}
		if f[i] == '%' {
			continue
		}
		_, size := utf8.DecodeRuneInString(f[i:])
		i += size - 1
		arg := s.sizeOf(s.argNum)
		s.argNum++
		// A verb prints its argument padded to width, or up to prec digits (%f, %e of a number).
		total = satAdd(total, satAdd(satAdd(width, prec), satAdd(arg, 16)))
		if total > MaxBuiltinStringBytes {
			return total
		}
	}
	if !s.reordered {
		for i := max(s.argNum, 0); i < len(s.sizes); i++ {
			total = satAdd(total, s.sizeOf(i)+16)
		}
	}
	return total
}

// printedSize estimates the length of v as sprintf prints it: strings as they are, numbers as written,
// composites as their Rego text, whose size is the sum of their elements (strings quoted) plus
// punctuation. It stops counting once it is past MaxBuiltinStringBytes.
func printedSize(v ast.Value) int64 {
	if s, ok := v.(ast.String); ok {
		return int64(len(s))
	}
	var n int64
	var walk func(v ast.Value)
	walk = func(v ast.Value) {
		if n > MaxBuiltinStringBytes {
			return
		}
		switch x := v.(type) {
		case ast.String:
			n += quotedLen(string(x))
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

// quotedLen bounds the length of s as a quoted Go or Rego string literal: printable runes as they are,
// others escaped as \xNN, \uNNNN or \UNNNNNNNN.
func quotedLen(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c < 0x20 || c == 0x7f:
				n += 4
			case c == '"' || c == '\\':
				n += 2
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 4
		case unicode.IsPrint(r):
			n += int64(size)
		case r < 0x10000:
			n += 6
		default:
			n += 10
		}
		i += size
	}
	return n
}
