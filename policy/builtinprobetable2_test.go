package policy

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

func init() {
	for name, list := range moreProbes {
		builtinProbes[name] = list
	}
}

// moreProbes continues builtinProbes: collections, encodings, time, cryptography.
var moreProbes = map[string][]probe{
	"and": ps(pr("sets", func(n int) []*ast.Term { return a(intSet(n/16), intSet(n/16)) })),
	"or": ps(pr("sets", func(n int) []*ast.Term {
		return a(intSet(n/16), setOf(n/16, func(i int) *ast.Term { return intT(-i) }))
	})),
	"set_diff":     ps(pr("sets", func(n int) []*ast.Term { return a(intSet(n/16), intSet(2)) })),
	"intersection": ps(pr("sets", func(n int) []*ast.Term { return a(ast.SetTerm(intSet(n/16), intSet(n/32))) })),
	"union": ps(pr("sets", func(n int) []*ast.Term {
		return a(ast.SetTerm(intSet(n/16), setOf(n/16, func(i int) *ast.Term { return intT(-i) })))
	})),
	"array.concat":  ps(pr("arrays", func(n int) []*ast.Term { return a(ints(n/8), ints(n/8)) })),
	"array.flatten": ps(pr("arrays", func(n int) []*ast.Term { return a(ast.ArrayTerm(ints(n/8), ints(n/8))) })),
	"array.reverse": ps(pr("array", func(n int) []*ast.Term { return a(ints(n / 8)) })),
	"cast_array":    ps(pr("set", func(n int) []*ast.Term { return a(intSet(n / 16)) })),
	"cast_set":      ps(pr("array", func(n int) []*ast.Term { return a(ints(n / 8)) })),
	"sort":          ps(pr("array", func(n int) []*ast.Term { return a(arrOf(n/8, func(i int) *ast.Term { return intT(-i) })) })),
	"object.keys":   ps(pr("object", func(n int) []*ast.Term { return a(objN(n / 16)) })),
	"object.remove": ps(pr("object", func(n int) []*ast.Term { return a(objN(n/16), ast.ArrayTerm(str("k1"))) })),
	"object.filter": ps(pr("object", func(n int) []*ast.Term { return a(objN(n/16), strs(n/16)) })),
	"object.union":  ps(pr("objects", func(n int) []*ast.Term { return a(objN(n/16), ast.ObjectTerm(ast.Item(str("new"), objN(n/16)))) })),
	"object.union_n": ps(pr("objects", func(n int) []*ast.Term {
		return a(ast.ArrayTerm(objN(n/16), ast.ObjectTerm(ast.Item(str("k1"), objN(n/16)))))
	})),
	"object.subset": ps(pr("arrays", func(n int) []*ast.Term {
		return a(arrOf(n/8, func(int) *ast.Term { return intT(0) }), ast.ArrayTerm(append(terms(n/16, func(int) *ast.Term { return intT(0) }), intT(1))...))
	})),
	"walk": ps(pr("tree", func(n int) []*ast.Term { return a(tree(n / 8)) }), prMax("deep", 1<<12, func(n int) []*ast.Term { return a(nested(n)) })),
	"json.filter": ps(pr("tree", func(n int) []*ast.Term {
		return a(ast.ObjectTerm(ast.Item(str("t"), tree(n/8))), ast.ArrayTerm(str("t")))
	})),
	"json.remove": ps(pr("tree", func(n int) []*ast.Term {
		return a(ast.ObjectTerm(ast.Item(str("t"), tree(n/8)), ast.Item(str("u"), intT(1))), ast.ArrayTerm(str("u")))
	})),
	"json.patch": ps(prMax("copies", 40, func(n int) []*ast.Term { return a(ast.ObjectTerm(ast.Item(str("t"), tree(64))), copies(n)) }),
		pr("document", func(n int) []*ast.Term {
			return a(tree(n/8), ast.ArrayTerm(ast.ObjectTerm(ast.Item(str("op"), str("add")), ast.Item(str("path"), str("/0")), ast.Item(str("value"), intT(1)))))
		})),
	"graph.reachable":           ps(pr("graph", func(n int) []*ast.Term { return a(graphOf(n/64), ast.ArrayTerm(str("v0"))) })),
	"net.cidr_contains_matches": ps(pr("pairs", func(n int) []*ast.Term { return a(cidrs(n/256), cidrs(n/256)) })),
	"net.cidr_merge":            ps(pr("cidrs", func(n int) []*ast.Term { return a(cidrs(n / 64)) })),
	"net.cidr_contains":         ps(pr("invalid", func(n int) []*ast.Term { return a(str("10.0.0.0/8"), text(n)) })),
	"net.cidr_intersects":       ps(pr("invalid", func(n int) []*ast.Term { return a(text(n), str("10.0.0.0/8")) })),
	"net.cidr_is_valid":         ps(pr("invalid", func(n int) []*ast.Term { return a(text(n)) })),

	"json.marshal": ps(pr("tree", func(n int) []*ast.Term { return a(tree(n / 8)) }), pr("escapes", func(n int) []*ast.Term { return a(str(rep("\x00<", n))) })),
	"json.marshal_with_options": ps(pr("indent", func(n int) []*ast.Term {
		return a(nested(8), ast.ObjectTerm(ast.Item(str("indent"), str(rep(" ", n)))))
	}), pr("tree", func(n int) []*ast.Term {
		return a(tree(n/8), ast.ObjectTerm(ast.Item(str("pretty"), ast.BooleanTerm(true))))
	})),
	"yaml.marshal":   ps(pr("tree", func(n int) []*ast.Term { return a(tree(n / 16)) }), pr("wide object", func(n int) []*ast.Term { return a(objN(n / 16)) })),
	"json.unmarshal": ps(pr("list", func(n int) []*ast.Term { return a(jsonList(n)) }), pr("objects", func(n int) []*ast.Term { return a(jsonObjects(n)) }), pr("number", func(n int) []*ast.Term { return a(str(rep("7", n))) })),
	"yaml.unmarshal": ps(pr("list", func(n int) []*ast.Term { return a(str(rep("- 0\n", n))) }), pr("flow", func(n int) []*ast.Term { return a(jsonList(n)) }),
		pr("mapping", func(n int) []*ast.Term { return a(yamlMapping(n)) }), prMax("aliases", 9, func(n int) []*ast.Term { return a(yamlBomb(n)) })),
	"yaml.is_valid": ps(pr("list", func(n int) []*ast.Term { return a(str(rep("- 0\n", n))) }), prMax("aliases", 9, func(n int) []*ast.Term { return a(yamlBomb(n)) })),
	"json.is_valid": ps(pr("list", func(n int) []*ast.Term { return a(jsonList(n)) }), pr("deep", func(n int) []*ast.Term { return a(str(rep("[", n))) })),

	"base64.encode":           ps(pr("text", func(n int) []*ast.Term { return a(text(n)) })),
	"base64.decode":           ps(pr("text", func(n int) []*ast.Term { return a(str(rep("YWJj", n))) })),
	"base64.is_valid":         ps(pr("text", func(n int) []*ast.Term { return a(str(rep("YWJj", n))) })),
	"base64url.encode":        ps(pr("text", func(n int) []*ast.Term { return a(text(n)) })),
	"base64url.encode_no_pad": ps(pr("text", func(n int) []*ast.Term { return a(text(n)) })),
	"base64url.decode":        ps(pr("text", func(n int) []*ast.Term { return a(str(rep("YWJj", n))) })),
	"hex.encode":              ps(pr("text", func(n int) []*ast.Term { return a(text(n)) })),
	"hex.decode":              ps(pr("text", func(n int) []*ast.Term { return a(str(rep("61", n))) })),
	"urlquery.encode":         ps(pr("text", func(n int) []*ast.Term { return a(str(rep("<é ", n))) })),
	"urlquery.decode":         ps(pr("text", func(n int) []*ast.Term { return a(str(rep("%41", n))) })),
	"urlquery.encode_object":  ps(pr("values", func(n int) []*ast.Term { return a(ast.ObjectTerm(ast.Item(str("k"), strs(n/8)))) })),
	"urlquery.decode_object":  ps(pr("parameters", func(n int) []*ast.Term { return a(str(rep("a=1&", n))) })),
	"uri.parse":               ps(pr("path", func(n int) []*ast.Term { return a(str("http://h/" + rep("p%41", n))) })),
	"uri.is_valid":            ps(pr("path", func(n int) []*ast.Term { return a(str("http://h/" + rep("p%41", n))) })),
	"semver.compare":          ps(pr("prerelease", func(n int) []*ast.Term { return a(str("1.0.0-"+rep("a.1", n)), str("1.0.0")) })),
	"semver.is_valid":         ps(pr("prerelease", func(n int) []*ast.Term { return a(str("1.0.0-" + rep("a.1", n))) })),

	"time.add_date":          ps(prMax("digits", 1<<13, func(n int) []*ast.Term { return a(digits(n), intT(1), intT(1), intT(1)) })),
	"time.clock":             ps(prMax("digits", 1<<13, func(n int) []*ast.Term { return a(digits(n)) })),
	"time.date":              ps(prMax("digits", 1<<13, func(n int) []*ast.Term { return a(digits(n)) })),
	"time.diff":              ps(prMax("digits", 1<<13, func(n int) []*ast.Term { return a(digits(n), intT(0)) })),
	"time.weekday":           ps(prMax("digits", 1<<13, func(n int) []*ast.Term { return a(digits(n)) })),
	"time.format":            ps(pr("layout", func(n int) []*ast.Term { return a(ast.ArrayTerm(intT(0), str("UTC"), str(rep("Monday ", n)))) })),
	"time.parse_ns":          ps(pr("value", func(n int) []*ast.Term { return a(str("2006"), text(n)) })),
	"time.parse_rfc3339_ns":  ps(pr("value", func(n int) []*ast.Term { return a(text(n)) })),
	"time.parse_duration_ns": ps(pr("value", func(n int) []*ast.Term { return a(str(rep("\x00", n))) })),

	"crypto.md5":         ps(pr("text", func(n int) []*ast.Term { return a(text(n)) })),
	"crypto.sha1":        ps(pr("text", func(n int) []*ast.Term { return a(text(n)) })),
	"crypto.sha256":      ps(pr("text", func(n int) []*ast.Term { return a(text(n)) })),
	"crypto.hmac.md5":    ps(pr("text", func(n int) []*ast.Term { return a(text(n), text(n)) })),
	"crypto.hmac.sha1":   ps(pr("text", func(n int) []*ast.Term { return a(text(n), str("k")) })),
	"crypto.hmac.sha256": ps(pr("text", func(n int) []*ast.Term { return a(text(n), str("k")) })),
	"crypto.hmac.sha512": ps(pr("text", func(n int) []*ast.Term { return a(text(n), str("k")) })),

	"crypto.x509.parse_certificates":            ps(pr("bundle", func(n int) []*ast.Term { return a(str(repeatPEM(cryptoFixtures().cert, n))) })),
	"crypto.x509.parse_and_verify_certificates": ps(pr("bundle", func(n int) []*ast.Term { return a(str(repeatPEM(cryptoFixtures().cert, n))) })),
	"crypto.x509.parse_and_verify_certificates_with_options": ps(pr("bundle", func(n int) []*ast.Term {
		return a(str(repeatPEM(cryptoFixtures().cert, n)), ast.ObjectTerm())
	})),
	"crypto.x509.parse_certificate_request": ps(pr("request", func(n int) []*ast.Term { return a(str(repeatPEM(cryptoFixtures().csr, n))) })),
	"crypto.x509.parse_keypair":             ps(pr("pair", func(n int) []*ast.Term { return a(str(repeatPEM(cryptoFixtures().cert, n)), str(cryptoFixtures().key)) })),
	"crypto.x509.parse_rsa_private_key":     ps(pr("key", func(n int) []*ast.Term { return a(str(repeatPEM(cryptoFixtures().rsaKey, n))) })),
	"crypto.parse_private_keys":             ps(pr("keys", func(n int) []*ast.Term { return a(str(repeatPEM(cryptoFixtures().key, n))) })),
	"io.jwt.decode":                         ps(pr("payload", func(n int) []*ast.Term { return a(jwt(n)) })),
}

func init() {
	for _, alg := range []string{"eddsa", "es256", "es384", "es512", "hs256", "hs384", "hs512", "ps256", "ps384", "ps512", "rs256", "rs384", "rs512"} {
		key := func() *ast.Term { return str(cryptoFixtures().cert) }
		if alg[0] == 'h' {
			key = func() *ast.Term { return str("secret") }
		}
		builtinProbes[fmt.Sprintf("io.jwt.verify_%s", alg)] = ps(pr("payload", func(n int) []*ast.Term { return a(jwt(n), key()) }))
	}
}
