package policy

import (
	"math"
	"math/big"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
)

// numberShape describes a number literal without converting it. length is the literal's length plus the
// magnitude of its exponent: what converting it to a big integer or rational costs (1e999999 is a
// million digits). mag is the decimal position of its most significant digit: 123 → 3, 0.05 → -1,
// 1e9 → 10, 0 → 0; a result printed as an integer has max(mag, 1) digits. ok is false when the literal is
// not a number.
func numberShape(n ast.Number) (length, mag int64, ok bool) {
	s := strings.TrimLeft(string(n), "+-")
	intPart, frac, exp := s, "", ""
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		intPart, exp = s[:i], s[i+1:]
		if exp == "" {
			return 0, 0, false
		}
	}
	if i := strings.IndexByte(intPart, '.'); i >= 0 {
		intPart, frac = intPart[:i], intPart[i+1:]
	}
	if intPart == "" && frac == "" {
		return 0, 0, false
	}
	e, ok := parseExponent(exp)
	if !ok {
		return 0, 0, false
	}
	if i := strings.IndexFunc(intPart, func(r rune) bool { return r != '0' }); i >= 0 {
		mag = int64(len(intPart) - i)
	} else if i := strings.IndexFunc(frac, func(r rune) bool { return r != '0' }); i >= 0 {
		mag = -int64(i)
	} else {
		return int64(len(n)), 0, true // zero
	}
	return satAdd(int64(len(n)), absInt(e)), mag + e, true // |e| and mag are far below MaxInt64/2
}

// parseExponent parses an optionally signed decimal exponent, saturating far beyond any bound.
func parseExponent(exp string) (int64, bool) {
	if exp == "" {
		return 0, true
	}
	neg := exp[0] == '-'
	exp = strings.TrimLeft(exp, "+-")
	if exp == "" {
		return 0, false
	}
	var e int64
	for i := 0; i < len(exp); i++ {
		c := exp[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		e = min(e*10+int64(c-'0'), math.MaxInt64/16)
	}
	if neg {
		e = -e
	}
	return e, true
}

func absInt(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// numberMag returns the magnitude of t, a number, or a digits error when it is too long to convert; ok is
// false when t is not a number (OPA then reports the type error).
func numberMag(t *ast.Term) (mag int64, le *BuiltinLimitError, ok bool) {
	n, isNum := t.Value.(ast.Number)
	if !isNum {
		return 0, nil, false
	}
	length, mag, valid := numberShape(n)
	if !valid {
		return 0, nil, false
	}
	return mag, digitsLimit(max(length, mag)), true
}

// numberMags returns numberMag of each of operands: their magnitudes, the first digits error, and false
// when one is not a number.
func numberMags(operands []*ast.Term) (mags []int64, le *BuiltinLimitError, ok bool) {
	mags = make([]int64, len(operands))
	for i, op := range operands {
		if mags[i], le, ok = numberMag(op); !ok || le != nil {
			return nil, le, ok
		}
	}
	return mags, nil, true
}

// arithmetic returns the check of a numeric builtin of one or two number operands (x, y; y is x for one)
// whose result has at most result(x, y) digits. It allocates nothing: arithmetic runs in loops.
func arithmetic(result func(x, y int64) int64) sizeCheck {
	return func(operands []*ast.Term) *BuiltinLimitError {
		x, le, ok := numberMag(operands[0])
		if !ok || le != nil {
			return le
		}
		y := x
		if len(operands) > 1 {
			if y, le, ok = numberMag(operands[1]); !ok || le != nil {
				return le
			}
		}
		return digitsLimit(max(result(x, y), 1))
	}
}

// Result magnitudes of the arithmetic builtins.
var (
	magUnary = func(x, _ int64) int64 { return x + 1 }
	magSum   = func(x, y int64) int64 { return max(x, y) + 1 }
	magMul   = func(x, y int64) int64 { return satAdd(max(x, 0), max(y, 0)) + 1 }
	magDiv   = func(x, y int64) int64 { return satAdd(max(x, 0), max(-y, 0)) + 2 }
	magRem   = func(_, y int64) int64 { return max(y, 1) }
	magMax   = func(x, y int64) int64 { return max(x, y) + 1 }
)

// decimalDigits returns the number of decimal digits of n > 0.
func decimalDigits(n int64) int64 {
	d := int64(1)
	for ; n >= 10; n /= 10 {
		d++
	}
	return d
}

// checkMinus bounds minus: numbers as subtraction, sets as the difference (at most the first set).
func checkMinus(operands []*ast.Term) *BuiltinLimitError {
	if s, ok := operands[0].Value.(ast.Set); ok {
		return elementsLimit(int64(s.Len()))
	}
	return arithmetic(magSum)(operands)
}

// checkAggregate bounds sum and product over an array or set of numbers.
func checkAggregate(product bool) sizeCheck {
	return func(operands []*ast.Term) *BuiltinLimitError {
		var terms []*ast.Term
		switch c := operands[0].Value.(type) {
		case *ast.Array:
			c.Foreach(func(t *ast.Term) { terms = append(terms, t) })
		case ast.Set:
			terms = c.Slice()
		default:
			return nil
		}
		mags, le, ok := numberMags(terms)
		if !ok || le != nil {
			return le
		}
		var result int64
		for _, m := range mags {
			if product {
				result = satAdd(result, max(m, 0))
			} else {
				result = max(result, m)
			}
		}
		return digitsLimit(satAdd(result, decimalDigits(int64(len(mags)))+1))
	}
}

// checkShiftLeft bounds bits.lsh(x, s): the result has the bits of x plus s.
func checkShiftLeft(operands []*ast.Term) *BuiltinLimitError {
	x, le, ok := numberMag(operands[0])
	if !ok || le != nil {
		return le
	}
	if _, le, ok := numberMag(operands[1]); !ok || le != nil {
		return le
	}
	shift, isInt := operands[1].Value.(ast.Number).Int64()
	if !isInt {
		if _, err := builtins.NumberToInt(operands[1].Value.(ast.Number)); err != nil {
			return nil // not an integer: OPA reports it
		}
		return digitsLimit(math.MaxInt64) // OPA would shift by the shift's low 64 bits
	}
	// 2^s has s·log10(2) digits.
	return digitsLimit(satAdd(max(x, 0), max(shift, 0)*30103/100000+1))
}

// checkRange bounds numbers.range and numbers.range_step by the length of the array they build.
func checkRange(operands []*ast.Term) *BuiltinLimitError {
	if _, le, ok := numberMags(operands); !ok || le != nil {
		return le
	}
	n, ok := rangeLength(operands)
	if !ok || n.Cmp(big.NewInt(MaxBuiltinArrayLength)) <= 0 {
		return nil
	}
	return &BuiltinLimitError{Size: clampInt64(n), Limit: MaxBuiltinArrayLength, Unit: UnitElements}
}

// rangeLength returns the number of elements numbers.range(x, y) (two operands) or numbers.range_step(x,
// y, step) (three) returns, and false when the operands are not integers or the step is not positive:
// OPA's implementation then reports the error. Callers bound the operands' digits first.
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

func clampInt64(n *big.Int) int64 {
	if n.IsInt64() {
		return n.Int64()
	}
	return math.MaxInt64
}

// checkNumberArgs bounds builtins that convert their number arguments (or the numbers in their array
// arguments, such as time.clock([ns, tz])) to big floats: the conversion allocates per digit.
func checkNumberArgs(operands []*ast.Term) *BuiltinLimitError {
	var le *BuiltinLimitError
	check := func(t *ast.Term) bool {
		if n, ok := t.Value.(ast.Number); ok {
			if length, mag, ok := numberShape(n); ok {
				le = digitsLimit(max(length, mag))
			}
		}
		return le != nil
	}
	for _, op := range operands {
		if arr, ok := op.Value.(*ast.Array); ok {
			arr.Until(check)
		} else {
			check(op)
		}
		if le != nil {
			return le
		}
	}
	return nil
}

// checkTimeFormat bounds time.format([ns, tz, layout]): its number like checkNumberArgs, and the layout,
// which the result repeats with each element expanded.
func checkTimeFormat(operands []*ast.Term) *BuiltinLimitError {
	return firstLimit(checkNumberArgs(operands), linear(8)(operands))
}

// checkToNumber bounds to_number: a string longer than MaxBuiltinNumberDigits would become a number no
// arithmetic builtin accepts (and its error would quote it).
func checkToNumber(operands []*ast.Term) *BuiltinLimitError {
	n, ok := stringLen(operands[0])
	if !ok {
		return nil
	}
	return digitsLimit(n)
}

// checkUnits bounds units.parse and units.parse_bytes: the amount is converted exactly, then multiplied by
// up to 2^60 (Ei), 19 more digits.
func checkUnits(operands []*ast.Term) *BuiltinLimitError {
	s, ok := operands[0].Value.(ast.String)
	if !ok {
		return nil
	}
	amount := strings.TrimRight(strings.ReplaceAll(string(s), "\"", ""), "KMGTPEikmgtpei")
	length, mag, valid := numberShape(ast.Number(amount))
	if !valid {
		return digitsLimit(int64(len(s)))
	}
	return digitsLimit(max(length, satAdd(mag, 19), int64(len(s))))
}
