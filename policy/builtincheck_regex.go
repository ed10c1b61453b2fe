package policy

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Estimated sizes for regular expressions and globs, measured on Go's regexp and gobwas/glob.
const (
	// instBytes is the memory of one compiled regexp instruction, with its share of the program.
	instBytes = 48
	// parseBytes bounds what parsing and compiling one byte of a pattern allocates (measured at 42 for
	// parsing an alternation of words, 95 for parsing and compiling it).
	parseBytes = 256
	// globBytes bounds the compiled size of one byte of a glob pattern.
	globBytes = 256
	// Per-match allocations of regex.find_n, regex.split and regex.find_all_string_submatch_n (measured at
	// 156, 214 and 402 bytes per match of one group on Go 1.26 and OPA 1.22).
	findMatchBytes     = 192
	splitMatchBytes    = 256
	submatchGroupBytes = 224
	submatchMatchBytes = 96
)

// patternInfo is what the checks need to know about a regular expression.
type patternInfo struct {
	insts    int64 // estimated compiled instructions, repetitions expanded
	runes    int64 // runes of the literals and character classes, which instructions share
	length   int64 // the pattern's length: the compiled regexp keeps it
	minWidth int64 // bytes of the shortest match
	groups   int64 // capture groups
	valid    bool  // false: the pattern does not parse, and OPA reports why
}

// compiledBytes estimates the memory of the compiled pattern.
func (p patternInfo) compiledBytes() int64 {
	return satAdd(satAdd(satMul(p.insts, instBytes), satMul(p.runes, 4)), p.length)
}

// patternCache remembers the analysis of recent patterns: policies match the same few patterns on every
// review, and parsing one again on each call would double the cost of regex.match.
var patternCache = struct {
	sync.Mutex
	m map[string]patternInfo
}{m: map[string]patternInfo{}}

// patternCacheSize and patternCacheMaxLen bound the cache to 512 patterns of at most 4 KiB.
const (
	patternCacheSize   = 512
	patternCacheMaxLen = 4 << 10
)

// analyzePattern parses pattern as Go's regexp does and estimates its compiled size, shortest match and
// groups without compiling it.
func analyzePattern(pattern string) patternInfo {
	patternCache.Lock()
	info, ok := patternCache.m[pattern]
	patternCache.Unlock()
	if ok {
		return info
	}
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err == nil {
		info = patternInfo{insts: satAdd(progSize(re), 2), runes: runeCount(re), length: int64(len(pattern)),
			minWidth: minWidth(re), groups: int64(re.MaxCap()), valid: true}
	}
	if len(pattern) > patternCacheMaxLen {
		return info // not worth keeping: parsing it again costs little next to matching it
	}
	patternCache.Lock()
	if len(patternCache.m) >= patternCacheSize {
		clear(patternCache.m)
	}
	patternCache.m[pattern] = info
	patternCache.Unlock()
	return info
}

// progSize bounds the number of instructions Go compiles re into, counting each repetition's copies.
func progSize(re *syntax.Regexp) int64 {
	var subs int64
	for _, s := range re.Sub {
		subs = satAdd(subs, progSize(s))
	}
	switch re.Op {
	case syntax.OpLiteral:
		return max(int64(len(re.Rune)), 1)
	case syntax.OpCapture:
		return satAdd(subs, 2)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return satAdd(subs, 1)
	case syntax.OpRepeat:
		if re.Max < 0 {
			return satAdd(satMul(int64(re.Min)+1, subs), 1)
		}
		return satAdd(satMul(int64(re.Max), subs), int64(re.Max-re.Min))
	case syntax.OpConcat:
		return subs
	case syntax.OpAlternate:
		return satAdd(subs, int64(len(re.Sub)))
	}
	return 1
}

// runeCount returns the runes of re's literals and character classes (\pL alone is 2,600), counted once:
// the copies of a repetition share them.
func runeCount(re *syntax.Regexp) int64 {
	n := int64(len(re.Rune))
	for _, s := range re.Sub {
		n = satAdd(n, runeCount(s))
	}
	return n
}

// minWidth returns the length in bytes of the shortest text re matches.
func minWidth(re *syntax.Regexp) int64 {
	switch re.Op {
	case syntax.OpLiteral:
		return int64(len(re.Rune))
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1
	case syntax.OpCapture, syntax.OpPlus:
		return minWidth(re.Sub[0])
	case syntax.OpRepeat:
		return satMul(int64(re.Min), minWidth(re.Sub[0]))
	case syntax.OpConcat:
		var n int64
		for _, s := range re.Sub {
			n = satAdd(n, minWidth(s))
		}
		return n
	case syntax.OpAlternate:
		n := minWidth(re.Sub[0])
		for _, s := range re.Sub[1:] {
			n = min(n, minWidth(s))
		}
		return n
	}
	return 0
}

// checkPattern bounds compiling pattern and running it over text bytes. ok is false when the pattern
// does not parse.
func checkPattern(pattern string, text int64) (patternInfo, *BuiltinLimitError, bool) {
	if le := memoryLimit(satMul(int64(len(pattern)), parseBytes)); le != nil {
		return patternInfo{}, le, true
	}
	info := analyzePattern(pattern)
	if !info.valid {
		return info, nil, false
	}
	return info, firstLimit(patternLimit(info.compiledBytes()), stepsLimit(satMul(info.insts, text+1))), true
}

// matchBound returns the most matches a FindAll of pattern over text bytes can return with limit n
// (negative: no limit): matches do not overlap, and an empty match advances one character.
func matchBound(info patternInfo, text int64, n ast.Value) int64 {
	bound := text/max(info.minWidth, 1) + 1
	if num, ok := n.(ast.Number); ok {
		if limit, ok := num.Int64(); ok && limit >= 0 {
			bound = min(bound, limit)
		}
	}
	return bound
}

// regexCheck returns the check of a regex builtin taking the pattern at operand pi and the text at ti;
// result, when set, bounds the memory of the result from the pattern and the number of matches.
func regexCheck(pi, ti int, result func(info patternInfo, matches int64) int64) sizeCheck {
	return func(operands []*ast.Term) *BuiltinLimitError {
		pattern, ok1 := operands[pi].Value.(ast.String)
		text, ok2 := operands[ti].Value.(ast.String)
		if !ok1 || !ok2 {
			return nil
		}
		info, le, ok := checkPattern(string(pattern), int64(len(text)))
		if !ok || le != nil || result == nil {
			return le
		}
		var n ast.Value
		if len(operands) > 2 && pi == 0 {
			n = operands[2].Value
		}
		return memoryLimit(result(info, matchBound(info, int64(len(text)), n)))
	}
}

// Result sizes of regex.find_n, regex.split and regex.find_all_string_submatch_n.
var (
	findResult     = func(_ patternInfo, m int64) int64 { return satMul(m, findMatchBytes) }
	splitResult    = func(_ patternInfo, m int64) int64 { return satMul(m+1, splitMatchBytes) }
	submatchResult = func(info patternInfo, m int64) int64 {
		return satMul(m, satAdd(satMul(info.groups+1, submatchGroupBytes), submatchMatchBytes))
	}
)

// checkRegexIsValid bounds regex.is_valid, which only parses the pattern.
func checkRegexIsValid(operands []*ast.Term) *BuiltinLimitError {
	n, ok := stringLen(operands[0])
	if !ok {
		return nil
	}
	return memoryLimit(satMul(n, parseBytes))
}

// checkRegexReplace bounds regex.replace(s, pattern, value): each match is replaced by value with its
// $-references expanded, and a reference repeats at most the text of one match, so the result is at most
// len(s) + matches·len(value) + references·len(s).
func checkRegexReplace(operands []*ast.Term) *BuiltinLimitError {
	args, ok := stringOperands(operands, 3)
	if !ok {
		return nil
	}
	s, pattern, value := args[0], args[1], args[2]
	info, le, ok := checkPattern(pattern, int64(len(s)))
	if !ok || le != nil {
		return le
	}
	matches := matchBound(info, int64(len(s)), nil)
	refs := int64(strings.Count(value, "$"))
	out := satAdd(satAdd(int64(len(s)), satMul(matches, int64(len(value)))), satMul(refs, int64(len(s))))
	indexes := satMul(matches, satAdd(satMul(info.groups+1, 16), 48))
	return firstLimit(stringLimit(out), memoryLimit(satAdd(satMul(out, 2), indexes)))
}

// checkRegexTemplate bounds regex.template_match(template, s, start, end): OPA compiles the template's
// delimited parts as regular expressions between its quoted literal parts, then each part on its own.
func checkRegexTemplate(operands []*ast.Term) *BuiltinLimitError {
	args, ok := stringOperands(operands, 4)
	if !ok || len(args[2]) != 1 || len(args[3]) != 1 {
		return nil
	}
	tpl, text, start, end := args[0], args[1], args[2], args[3]
	pattern, ok := templatePattern(tpl, start[0], end[0])
	if !ok {
		return nil
	}
	info, le, ok := checkPattern(pattern, int64(len(text)))
	if !ok || le != nil {
		return le
	}
	return patternLimit(satMul(info.compiledBytes(), 2))
}

// templatePattern builds the regular expression OPA generates for a regex.template_match template; ok is
// false when the delimiters are unbalanced.
func templatePattern(tpl string, startDelim, endDelim byte) (string, bool) {
	var b strings.Builder
	b.WriteByte('^')
	level, open, last := 0, 0, 0
	for i := 0; i < len(tpl); i++ {
		switch tpl[i] {
		case startDelim:
			if level++; level == 1 {
				open = i
			}
		case endDelim:
			if level--; level == 0 {
				b.WriteString(regexp.QuoteMeta(tpl[last:open]))
				b.WriteString("(" + tpl[open+1:i] + ")")
				last = i + 1
			} else if level < 0 {
				return "", false
			}
		}
	}
	if level != 0 {
		return "", false
	}
	b.WriteString(regexp.QuoteMeta(tpl[last:]) + "$")
	return b.String(), true
}

// checkGlobsMatch bounds regex.globs_match(a, b), which intersects two glob-like patterns.
func checkGlobsMatch(operands []*ast.Term) *BuiltinLimitError {
	a, ok1 := stringLen(operands[0])
	b, ok2 := stringLen(operands[1])
	if !ok1 || !ok2 {
		return nil
	}
	return firstLimit(memoryLimit(satMul(a+b, globBytes)), stepsLimit(satMul(a+1, b+1)))
}

// checkGlobMatch bounds glob.match(pattern, delimiters, s): compiling the pattern, which OPA caches, and
// matching it, at worst every pattern position against every text position.
func checkGlobMatch(operands []*ast.Term) *BuiltinLimitError {
	pattern, ok1 := stringLen(operands[0])
	text, ok2 := stringLen(operands[2])
	if !ok1 || !ok2 {
		return nil
	}
	delims, _ := collectionLen(operands[1].Value)
	return firstLimit(patternLimit(satMul(satAdd(pattern, delims), globBytes)), stepsLimit(satMul(pattern+1, text+1)))
}
