package policy

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A probe generates the arguments of calls to one builtin that grow with n: n bytes of string, n elements
// of collection, n digits of number or n levels of nesting, depending on the probe. The inventory tests
// call builtins directly with them, and the campaign writes policies around them.
type probe struct {
	name string
	args func(n int) []*ast.Term
	// max is the largest n worth generating (0: maxProbeSize): beyond it the probe stops growing or takes
	// too long to build.
	max int
}

// maxProbeSize is the largest n of a probe: 2 Mi bytes (half MaxBuiltinStringBytes, more than the
// apiserver stores in an object) or elements.
const maxProbeSize = 1 << 21

func (p probe) limit() int {
	if p.max > 0 {
		return p.max
	}
	return maxProbeSize
}

// Argument builders.

func str(s string) *ast.Term { return ast.StringTerm(s) }

func rep(s string, n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat(s, n/len(s)+1)[:n]
}

func text(n int) *ast.Term        { return str(rep("ab,c<d", n)) }
func unicodeText(n int) *ast.Term { return str(rep("aé\u2028z\x00", n)) }
func numberT(s string) *ast.Term  { return ast.NumberTerm(json.Number(s)) }
func digits(n int) *ast.Term      { return numberT("1" + strings.Repeat("0", max(n-1, 0))) }
func exp10(n int) *ast.Term       { return numberT(fmt.Sprintf("1e%d", n)) }
func nullT() *ast.Term            { return ast.NullTerm() }

func terms(n int, f func(i int) *ast.Term) []*ast.Term {
	ts := make([]*ast.Term, n)
	for i := range ts {
		ts[i] = f(i)
	}
	return ts
}

func arrOf(n int, f func(i int) *ast.Term) *ast.Term { return ast.ArrayTerm(terms(n, f)...) }
func setOf(n int, f func(i int) *ast.Term) *ast.Term { return ast.SetTerm(terms(n, f)...) }
func ints(n int) *ast.Term                           { return arrOf(n, ast.IntNumberTerm) }
func intSet(n int) *ast.Term                         { return setOf(n, ast.IntNumberTerm) }
func strs(n int) *ast.Term {
	return arrOf(n, func(i int) *ast.Term { return str(fmt.Sprintf("s%d", i)) })
}

// objN is an object of n keys k0..k(n-1) whose values are their index.
func objN(n int) *ast.Term {
	items := make([][2]*ast.Term, n)
	for i := range items {
		items[i] = ast.Item(str(fmt.Sprintf("k%d", i)), ast.IntNumberTerm(i))
	}
	return ast.ObjectTerm(items...)
}

// nested is an object nested n levels deep, each level with a few leaves.
func nested(n int) *ast.Term {
	t := ast.ObjectTerm(ast.Item(str("leaf"), str("x")))
	for i := 0; i < n; i++ {
		t = ast.ObjectTerm(ast.Item(str("a"), t), ast.Item(str("b"), ints(3)), ast.Item(str("c"), str("v")))
	}
	return t
}

// tree is a document of about n nodes: an array of small objects.
func tree(n int) *ast.Term {
	return arrOf(max(n/4, 1), func(i int) *ast.Term {
		return ast.ObjectTerm(ast.Item(str("name"), str(fmt.Sprintf("n%d", i))), ast.Item(str("v"), ints(2)))
	})
}

// jsonList is a JSON (or YAML flow) array of n/2 zeros.
func jsonList(n int) *ast.Term { return str("[" + rep("0,", max(n-2, 0)) + "0]") }

// jsonObjects is a JSON array of about n/3 empty objects.
func jsonObjects(n int) *ast.Term { return str("[" + rep("{},", max(n-4, 0)) + "{}]") }

// yamlMapping is a YAML mapping of about n/10 keys.
func yamlMapping(n int) *ast.Term {
	var b strings.Builder
	for i := 0; b.Len() < n; i++ {
		fmt.Fprintf(&b, "k%06d: 0\n", i)
	}
	return str(b.String())
}

// yamlBomb is a YAML document of n levels, each a sequence of ten aliases of the level below: 10^n
// nodes in a few hundred bytes.
func yamlBomb(n int) *ast.Term {
	var b strings.Builder
	b.WriteString("l0: &l0 [a, b, c, d, e, f, g, h, i, j]\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "l%d: &l%d [", i, i)
		for j := 0; j < 10; j++ {
			fmt.Fprintf(&b, "*l%d, ", i-1)
		}
		b.WriteString("x]\n")
	}
	return str(b.String())
}

// alternation is a regular expression alternating n/10 words.
func alternation(n int) *ast.Term {
	words := make([]string, max(n/10, 1))
	for i := range words {
		words[i] = fmt.Sprintf("w%07d", i)
	}
	return str("^(" + strings.Join(words, "|") + ")$")
}

// graphOf is a graph of n vertices "v0".."v(n-1)", each with an edge to the next two.
func graphOf(n int) *ast.Term {
	v := func(i int) *ast.Term { return str(fmt.Sprintf("v%d", i%max(n, 1))) }
	items := make([][2]*ast.Term, n)
	for i := range items {
		items[i] = ast.Item(v(i), ast.ArrayTerm(v(i+1), v(i+2)))
	}
	return ast.ObjectTerm(items...)
}

// copies is a JSON patch of n "copy" operations of the whole document into new keys.
func copies(n int) *ast.Term {
	return arrOf(n, func(i int) *ast.Term {
		return ast.ObjectTerm(ast.Item(str("op"), str("copy")), ast.Item(str("from"), str("")), ast.Item(str("path"), str(fmt.Sprintf("/c%d", i))))
	})
}

// cidrs is an array of n IPv4 /32 CIDRs.
func cidrs(n int) *ast.Term {
	return arrOf(n, func(i int) *ast.Term { return str(fmt.Sprintf("10.%d.%d.%d/32", i>>16&255, i>>8&255, i&255)) })
}

// jwt is an unsigned-looking token whose payload claim is n bytes.
func jwt(n int) *ast.Term {
	enc := func(s string) string { return strings.TrimRight(b64(s), "=") }
	return str(enc(`{"alg":"HS256","typ":"JWT"}`) + "." + enc(`{"sub":"`+rep("x", n)+`"}`) + "." + enc("sig"))
}

func b64(s string) string { return base64.URLEncoding.EncodeToString([]byte(s)) }

func intT(i int) *ast.Term { return ast.IntNumberTerm(i) }
