package policy

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// ps builds a probe list.
func ps(list ...probe) []probe { return list }

func pr(name string, args func(n int) []*ast.Term) probe { return probe{name: name, args: args} }
func prMax(name string, limit int, args func(n int) []*ast.Term) probe {
	return probe{name: name, args: args, max: limit}
}

func a(ts ...*ast.Term) []*ast.Term { return ts }

// unprobed are allowed builtins the probes cannot call directly, with the reason.
var unprobed = map[string]string{
	"assign": "unification, evaluated by OPA's evaluator itself",
	"eq":     "unification, evaluated by OPA's evaluator itself",
	"print":  "rewritten by the compiler into internal.print",
}

// builtinProbes lists, for every allowed builtin but the unprobed ones, calls whose arguments grow.
var builtinProbes = map[string][]probe{
	"equal": ps(pr("arrays", func(n int) []*ast.Term { return a(ints(n/8), ints(n/8)) })),
	"neq":   ps(pr("strings", func(n int) []*ast.Term { return a(text(n), text(n)) })),
	"gt":    ps(pr("strings", func(n int) []*ast.Term { return a(text(n), text(n)) })),
	"gte":   ps(pr("arrays", func(n int) []*ast.Term { return a(ints(n/8), ints(n/8)) })),
	"lt":    ps(prMax("numbers", 1<<13, func(n int) []*ast.Term { return a(digits(n), digits(n)) })),
	"lte":   ps(pr("strings", func(n int) []*ast.Term { return a(text(n), text(n)) })),

	"internal.member_2": ps(pr("array", func(n int) []*ast.Term { return a(str("x"), strs(n/8)) })),
	"internal.member_3": ps(pr("object", func(n int) []*ast.Term { return a(str("k1"), intT(5), objN(n/16)) })),
	"is_array":          ps(pr("array", func(n int) []*ast.Term { return a(ints(n / 8)) })),
	"is_boolean":        ps(pr("string", func(n int) []*ast.Term { return a(text(n)) })),
	"is_null":           ps(pr("string", func(n int) []*ast.Term { return a(text(n)) })),
	"is_number":         ps(pr("string", func(n int) []*ast.Term { return a(text(n)) })),
	"is_object":         ps(pr("object", func(n int) []*ast.Term { return a(objN(n / 16)) })),
	"is_set":            ps(pr("set", func(n int) []*ast.Term { return a(intSet(n / 16)) })),
	"is_string":         ps(pr("string", func(n int) []*ast.Term { return a(text(n)) })),
	"type_name":         ps(pr("object", func(n int) []*ast.Term { return a(objN(n / 16)) })),
	"cast_boolean":      ps(pr("string", func(n int) []*ast.Term { return a(text(n)) })),
	"cast_null":         ps(pr("string", func(n int) []*ast.Term { return a(text(n)) })),
	"cast_object":       ps(pr("object", func(n int) []*ast.Term { return a(objN(n / 16)) })),
	"cast_string":       ps(pr("string", func(n int) []*ast.Term { return a(unicodeText(n)) })),
	"all":               ps(pr("array", func(n int) []*ast.Term { return a(arrOf(n/8, func(int) *ast.Term { return ast.BooleanTerm(true) })) })),
	"any":               ps(pr("array", func(n int) []*ast.Term { return a(arrOf(n/8, func(int) *ast.Term { return ast.BooleanTerm(false) })) })),
	"count":             ps(pr("string", func(n int) []*ast.Term { return a(unicodeText(n)) }), pr("array", func(n int) []*ast.Term { return a(ints(n / 8)) })),
	"max":               ps(pr("array", func(n int) []*ast.Term { return a(ints(n / 8)) }), pr("set", func(n int) []*ast.Term { return a(intSet(n / 16)) })),
	"min":               ps(pr("array", func(n int) []*ast.Term { return a(ints(n / 8)) })),
	"object.get":        ps(pr("object", func(n int) []*ast.Term { return a(objN(n/16), ast.ArrayTerm(str("k1")), nullT()) })),
	"array.slice":       ps(pr("array", func(n int) []*ast.Term { return a(ints(n/8), intT(1), intT(n/16)) })),
	"crypto.hmac.equal": ps(pr("strings", func(n int) []*ast.Term { return a(text(n), text(n)) })),

	"rego.metadata.chain": ps(pr("none", func(int) []*ast.Term { return nil })),
	"rego.metadata.rule":  ps(pr("none", func(int) []*ast.Term { return nil })),
	"internal.test_case":  ps(pr("object", func(n int) []*ast.Term { return a(ast.ArrayTerm(objN(n / 16))) })),
	"trace":               ps(pr("string", func(n int) []*ast.Term { return a(text(n)) })),

	"contains":      ps(pr("string", func(n int) []*ast.Term { return a(text(n), str("zz")) })),
	"startswith":    ps(pr("string", func(n int) []*ast.Term { return a(text(n), text(n)) })),
	"endswith":      ps(pr("string", func(n int) []*ast.Term { return a(text(n), str("d")) })),
	"strings.count": ps(pr("string", func(n int) []*ast.Term { return a(text(n), str("a")) })),
	"trim":          ps(pr("string", func(n int) []*ast.Term { return a(unicodeText(n), str("aé")) })),
	"trim_left":     ps(pr("string", func(n int) []*ast.Term { return a(text(n), str("ab")) })),
	"trim_prefix":   ps(pr("string", func(n int) []*ast.Term { return a(text(n), str("ab")) })),
	"trim_right":    ps(pr("string", func(n int) []*ast.Term { return a(text(n), str("d")) })),
	"trim_suffix":   ps(pr("string", func(n int) []*ast.Term { return a(text(n), str("d")) })),
	"trim_space":    ps(pr("string", func(n int) []*ast.Term { return a(str(" " + rep("x", n) + " ")) })),

	"concat": ps(pr("words", func(n int) []*ast.Term { return a(str(", "), strs(n/8)) }),
		pr("separator", func(n int) []*ast.Term { return a(text(n), strs(8)) })),
	"replace":           ps(pr("empty old", func(n int) []*ast.Term { return a(text(n/64), str(""), text(n/64)) }), pr("growing", func(n int) []*ast.Term { return a(text(n), str("a"), str("xyz")) })),
	"strings.replace_n": ps(pr("growing", func(n int) []*ast.Term { return a(ast.ObjectTerm(ast.Item(str("a"), str("xyzw"))), text(n)) })),
	"sprintf": ps(pr("repeated", func(n int) []*ast.Term { return a(str("%[1]s%[1]s%[1]s%[1]s"), ast.ArrayTerm(text(n))) }),
		pr("composite", func(n int) []*ast.Term { return a(str("%v"), ast.ArrayTerm(strs(n/8))) }),
		prMax("big integer", 1<<15, func(n int) []*ast.Term { return a(str("%d"), ast.ArrayTerm(digits(n))) })),
	"internal.template_string": ps(pr("parts", func(n int) []*ast.Term { return a(ast.ArrayTerm(text(n), strs(n/8))) })),
	"internal.print": ps(pr("sets", func(n int) []*ast.Term {
		return a(ast.ArrayTerm(setOf(n/8, ast.IntNumberTerm), setOf(64, ast.IntNumberTerm)))
	})),
	"strings.render_template": ps(pr("range", func(n int) []*ast.Term {
		return a(str("{{range .xs}}{{.}},{{end}}"), ast.ObjectTerm(ast.Item(str("xs"), ints(n/8))))
	}), prMax("nested ranges", 1<<16, func(n int) []*ast.Term {
		return a(str("{{range .xs}}{{range $.xs}}{{range $.xs}}{{end}}{{end}}{{end}}"), ast.ObjectTerm(ast.Item(str("xs"), ints(n/8))))
	})),
	"split":           ps(pr("separators", func(n int) []*ast.Term { return a(text(n), str(",")) }), pr("empty", func(n int) []*ast.Term { return a(text(n), str("")) })),
	"strings.split_n": ps(pr("all", func(n int) []*ast.Term { return a(text(n), str(","), intT(-1)) })),
	"indexof_n":       ps(pr("ascii", func(n int) []*ast.Term { return a(text(n), str("a")) }), pr("unicode", func(n int) []*ast.Term { return a(unicodeText(n), str("z")) })),
	"indexof":         ps(pr("unicode", func(n int) []*ast.Term { return a(unicodeText(n), str("q")) }), pr("unicode search", func(n int) []*ast.Term { return a(text(n), str("é")) })),
	"substring":       ps(pr("unicode", func(n int) []*ast.Term { return a(unicodeText(n), intT(1), intT(n/2)) })),
	"upper":           ps(pr("ascii", func(n int) []*ast.Term { return a(text(n)) }), pr("unicode", func(n int) []*ast.Term { return a(unicodeText(n)) })),
	"lower":           ps(pr("unicode", func(n int) []*ast.Term { return a(str(rep("ȾAb\xff", n))) })),
	"strings.reverse": ps(pr("unicode", func(n int) []*ast.Term { return a(unicodeText(n)) })),

	"strings.any_prefix_match": ps(pr("collections", func(n int) []*ast.Term { return a(strs(n/16), strs(n/16)) })),
	"strings.any_suffix_match": ps(pr("collections", func(n int) []*ast.Term { return a(strs(n/16), strs(n/16)) })),
	"format_int":               ps(prMax("digits", 1<<15, func(n int) []*ast.Term { return a(digits(n), intT(2)) })),
	"to_number":                ps(pr("digits", func(n int) []*ast.Term { return a(str(rep("1", n))) })),

	"regex.match":                      ps(pr("text", func(n int) []*ast.Term { return a(str("(a|b|ab)*c"), text(n)) }), pr("alternation", func(n int) []*ast.Term { return a(alternation(n), str("w0000001")) })),
	"re_match":                         ps(pr("text", func(n int) []*ast.Term { return a(str("^[a-z,<]+$"), text(n)) })),
	"regex.is_valid":                   ps(pr("alternation", func(n int) []*ast.Term { return a(alternation(n)) })),
	"regex.split":                      ps(pr("matches", func(n int) []*ast.Term { return a(str("a"), text(n)) })),
	"regex.find_n":                     ps(pr("matches", func(n int) []*ast.Term { return a(str("[a-d]"), text(n), intT(-1)) })),
	"regex.find_all_string_submatch_n": ps(pr("groups", func(n int) []*ast.Term { return a(str("(a)(b)?(c)?"), text(n), intT(-1)) }), pr("one group", func(n int) []*ast.Term { return a(str("(a)"), str(rep("a", n)), intT(-1)) })),
	"regex.replace":                    ps(pr("references", func(n int) []*ast.Term { return a(text(n), str("(b)"), str("$1$1$1")) }), pr("whole", func(n int) []*ast.Term { return a(text(n/16), str("(.*)"), str(rep("$1", 32))) })),
	"regex.template_match": ps(pr("text", func(n int) []*ast.Term {
		return a(str("urn:{[a-z,<]*}:x"), str("urn:"+rep("ab", n)+":x"), str("{"), str("}"))
	})),
	"regex.globs_match": ps(prMax("patterns", 1<<16, func(n int) []*ast.Term { return a(str(rep("a.*", n)), str(rep(".*a", n))) })),
	"glob.match": ps(pr("text", func(n int) []*ast.Term { return a(str("*a*b*c*"), nullT(), text(n)) }),
		prMax("pattern", 1<<20, func(n int) []*ast.Term { return a(str(rep("{a,b}", n)), nullT(), str("ab")) })),
	"glob.quote_meta": ps(pr("metacharacters", func(n int) []*ast.Term { return a(str(rep("*?[", n))) })),

	"abs":                ps(prMax("exponent", 1<<24, func(n int) []*ast.Term { return a(exp10(n)) })),
	"ceil":               ps(prMax("exponent", 1<<24, func(n int) []*ast.Term { return a(numberT(fmt.Sprintf("1.5e%d", n))) })),
	"floor":              ps(prMax("exponent", 1<<24, func(n int) []*ast.Term { return a(exp10(n)) })),
	"round":              ps(prMax("exponent", 1<<24, func(n int) []*ast.Term { return a(exp10(n)) })),
	"plus":               ps(prMax("exponent", 1<<24, func(n int) []*ast.Term { return a(exp10(n), intT(1)) })),
	"minus":              ps(prMax("exponent", 1<<24, func(n int) []*ast.Term { return a(exp10(n), intT(1)) }), pr("sets", func(n int) []*ast.Term { return a(intSet(n/16), intSet(8)) })),
	"mul":                ps(prMax("exponents", 1<<24, func(n int) []*ast.Term { return a(exp10(n), exp10(n)) })),
	"div":                ps(prMax("exponents", 1<<24, func(n int) []*ast.Term { return a(exp10(n), numberT(fmt.Sprintf("1e-%d", n))) })),
	"rem":                ps(prMax("digits", 1<<15, func(n int) []*ast.Term { return a(digits(n), intT(7)) })),
	"sum":                ps(prMax("exponents", 1<<24, func(n int) []*ast.Term { return a(ast.ArrayTerm(exp10(n), numberT("0.5"))) })),
	"product":            ps(prMax("exponents", 1<<24, func(n int) []*ast.Term { return a(arrOf(4, func(int) *ast.Term { return exp10(n) })) })),
	"bits.and":           ps(prMax("digits", 1<<15, func(n int) []*ast.Term { return a(digits(n), digits(n)) })),
	"bits.or":            ps(prMax("digits", 1<<15, func(n int) []*ast.Term { return a(digits(n), digits(n)) })),
	"bits.xor":           ps(prMax("digits", 1<<15, func(n int) []*ast.Term { return a(digits(n), intT(3)) })),
	"bits.negate":        ps(prMax("digits", 1<<15, func(n int) []*ast.Term { return a(digits(n)) })),
	"bits.rsh":           ps(prMax("digits", 1<<15, func(n int) []*ast.Term { return a(digits(n), intT(3)) })),
	"bits.lsh":           ps(prMax("shift", 1<<26, func(n int) []*ast.Term { return a(intT(1), intT(n)) })),
	"numbers.range":      ps(pr("length", func(n int) []*ast.Term { return a(intT(1), intT(n)) })),
	"numbers.range_step": ps(pr("length", func(n int) []*ast.Term { return a(intT(1), intT(n), intT(1)) })),
	"units.parse":        ps(prMax("exponent", 1<<20, func(n int) []*ast.Term { return a(str(fmt.Sprintf("1e%dKi", n))) })),
	"units.parse_bytes":  ps(prMax("digits", 1<<15, func(n int) []*ast.Term { return a(str(rep("9", n) + "Ki")) })),
}
