package policy

import "github.com/open-policy-agent/opa/v1/topdown"

// replacedBuiltins are OPA builtins the engine replaces with bounded implementations: one whose result
// size is only known once built (strings.render_template), one whose work OPA lets grow exponentially
// (graph.reachable). (Assigned in init: the bounded implementations format BuiltinLimitErrors, whose
// messages read builtinBounds.)
var replacedBuiltins map[string]topdown.BuiltinFunc

// builtinClass says how the engine keeps one builtin call from allocating (or working) without bound.
type builtinClass uint8

const (
	// classConstant: the call allocates a constant amount, whatever the size of its arguments (tests,
	// comparisons, lookups, fixed-size digests).
	classConstant builtinClass = iota + 1
	// classCapped: the call may allocate in proportion to its arguments, or more; a check estimates what
	// it would build from the arguments and stops the evaluation with a BuiltinLimitError before the call
	// when that is over a bound (see builtinlimits.go).
	classCapped
	// classRefused: policies may not call it; Validate rejects them with the reason.
	classRefused
)

// builtinBound is the classification of one builtin.
type builtinBound struct {
	class builtinClass
	// check is the size check of a capped builtin, run before OPA's implementation or the bounded one
	// in replacedBuiltins; nil when the bounded implementation checks as it goes.
	check sizeCheck
	// fix tells the policy author how to stay within a capped builtin's bounds; for a refused builtin, why
	// it is refused and what to use instead.
	fix string
	// why says, for a constant builtin, why its allocation does not grow with its arguments.
	why string
}

func constant(why string) builtinBound { return builtinBound{class: classConstant, why: why} }
func refused(fix string) builtinBound  { return builtinBound{class: classRefused, fix: fix} }
func capped(check sizeCheck, fix string) builtinBound {
	return builtinBound{class: classCapped, check: check, fix: fix}
}

// How to stay within the bounds, by kind of builtin.
const (
	fixStrings     = "build messages from the offending values only, not from whole objects or repeated text"
	fixCollections = "iterate over the reviewed object's own collections (some x in input.review.object...) instead of building large ones, or handle fewer elements per call"
	fixNumbers     = "compare numbers instead of computing huge ones, and check numbers taken from the input with a comparison (n < 1e15) before doing arithmetic on them"
	fixRegex       = "keep patterns short (use `in` over a set instead of long alternations of literals, lower repetition counts), match shorter strings (check count(s) first), or pass a smaller n"
	fixDecode      = "decode smaller documents: check count(s) before decoding, and avoid YAML anchors and aliases"
	fixEncode      = "encode the offending fields rather than whole objects or the inventory, and keep indents and prefixes short"
	fixText        = "pass shorter strings: check count(s) before calling it"
	fixSplit       = "split shorter strings (check count(s) first) or use strings.split_n with a small n"
	fixRange       = "iterate over the reviewed object's own collections (some x in input.review.object...) instead of a range of numbers, or narrow the range"
	fixWork        = "compare smaller collections per call: the work grows with the product of their sizes"
	fixTemplate    = "render templates without named templates, with fewer nested range actions over smaller collections"
)

// Reasons constant builtins allocate a constant amount.
const (
	whyTest    = "returns a boolean or a type name, allocating nothing that depends on its arguments"
	whyCompare = "compares its arguments in place"
	whyLookup  = "returns one of its arguments or a part of one, sharing its memory"
	whySubstr  = "returns a substring of its argument, sharing its memory"
	whyDigest  = "streams its argument through a fixed-size hash"
	whyCount   = "counts without copying"
	whyCompile = "is rewritten by the compiler; the call that remains allocates nothing that depends on its arguments"
)

// quotedBytes is allocated per byte of a string argument by builtins whose error message quotes it: a
// byte may be escaped to four (\x00), and the message is copied several times on its way out.
const quotedBytes = 32

// builtinBounds classifies every builtin the engine's capabilities allow, and the ones it refuses for
// their size. TestBuiltinInventory fails when a builtin of the OPA version in go.mod is neither classified
// here nor forbidden by ForbiddenBuiltin's network, clock and randomness rules, so a new OPA builtin
// must be classified before it can be used; it also verifies the constant classifications by measuring
// their allocations with large arguments.
var builtinBounds = map[string]builtinBound{
	// Comparisons, membership, types.
	"assign":              constant(whyCompare),
	"eq":                  constant(whyCompare),
	"equal":               constant(whyCompare),
	"neq":                 constant(whyCompare),
	"gt":                  constant(whyCompare),
	"gte":                 constant(whyCompare),
	"lt":                  constant(whyCompare),
	"lte":                 constant(whyCompare),
	"internal.member_2":   constant(whyCompare),
	"internal.member_3":   constant(whyCompare),
	"is_array":            constant(whyTest),
	"is_boolean":          constant(whyTest),
	"is_null":             constant(whyTest),
	"is_number":           constant(whyTest),
	"is_object":           constant(whyTest),
	"is_set":              constant(whyTest),
	"is_string":           constant(whyTest),
	"type_name":           constant(whyTest),
	"cast_boolean":        constant(whyLookup),
	"cast_null":           constant(whyLookup),
	"cast_object":         constant(whyLookup),
	"cast_string":         constant(whyLookup),
	"all":                 constant(whyTest),
	"any":                 constant(whyTest),
	"count":               constant(whyCount),
	"max":                 constant(whyLookup),
	"min":                 constant(whyLookup),
	"object.get":          constant(whyLookup),
	"array.slice":         constant(whyLookup),
	"crypto.hmac.equal":   constant(whyCompare),
	"print":               constant(whyCompile),
	"rego.metadata.chain": constant(whyCompile),
	"rego.metadata.rule":  constant(whyCompile),
	"internal.test_case":  constant(whyCompile),
	"trace":               constant(whyCompile),

	// Strings.
	"contains":                 constant(whyTest),
	"startswith":               constant(whyTest),
	"endswith":                 constant(whyTest),
	"strings.count":            constant(whyCount),
	"trim":                     constant(whySubstr),
	"trim_left":                constant(whySubstr),
	"trim_prefix":              constant(whySubstr),
	"trim_right":               constant(whySubstr),
	"trim_suffix":              constant(whySubstr),
	"trim_space":               constant(whySubstr),
	"concat":                   capped(checkConcat, fixStrings),
	"replace":                  capped(checkReplace, fixStrings),
	"strings.replace_n":        capped(checkReplaceN, fixStrings),
	"sprintf":                  capped(checkSprintf, fixStrings),
	"internal.template_string": capped(checkTemplateString, fixStrings),
	"internal.print":           capped(checkPrint, fixStrings),
	"strings.render_template":  capped(nil, fixTemplate),
	"split":                    capped(checkSplit, fixSplit),
	"strings.split_n":          capped(checkSplitN, fixSplit),
	"indexof_n":                capped(checkIndexOfN, fixSplit),
	"indexof":                  capped(checkRunes, fixText),
	"substring":                capped(checkRunes, fixText),
	"upper":                    capped(checkCase, fixText),
	"lower":                    capped(checkCase, fixText),
	"strings.reverse":          capped(linear(2), fixText),
	"strings.any_prefix_match": capped(checkAffixMatch, fixCollections),
	"strings.any_suffix_match": capped(checkAffixMatch, fixCollections),
	"format_int":               capped(arithmetic(magMax), fixNumbers),
	"to_number":                capped(checkToNumber, fixNumbers),

	// Regular expressions and globs.
	"regex.match":                      capped(regexCheck(0, 1, nil), fixRegex),
	"re_match":                         capped(regexCheck(0, 1, nil), fixRegex),
	"regex.is_valid":                   capped(checkRegexIsValid, fixRegex),
	"regex.split":                      capped(regexCheck(0, 1, splitResult), fixRegex),
	"regex.find_n":                     capped(regexCheck(0, 1, findResult), fixRegex),
	"regex.find_all_string_submatch_n": capped(regexCheck(0, 1, submatchResult), fixRegex),
	"regex.replace":                    capped(checkRegexReplace, fixRegex),
	"regex.template_match":             capped(checkRegexTemplate, fixRegex),
	"regex.globs_match":                capped(checkGlobsMatch, fixRegex),
	"glob.match":                       capped(checkGlobMatch, fixRegex),
	"glob.quote_meta":                  capped(linear(4), fixText),

	// Numbers.
	"abs":                capped(arithmetic(magUnary), fixNumbers),
	"ceil":               capped(arithmetic(magUnary), fixNumbers),
	"floor":              capped(arithmetic(magUnary), fixNumbers),
	"round":              capped(arithmetic(magUnary), fixNumbers),
	"plus":               capped(arithmetic(magSum), fixNumbers),
	"minus":              capped(checkMinus, fixNumbers),
	"mul":                capped(arithmetic(magMul), fixNumbers),
	"div":                capped(arithmetic(magDiv), fixNumbers),
	"rem":                capped(arithmetic(magRem), fixNumbers),
	"sum":                capped(checkAggregate(false), fixNumbers),
	"product":            capped(checkAggregate(true), fixNumbers),
	"bits.and":           capped(arithmetic(magMax), fixNumbers),
	"bits.or":            capped(arithmetic(magMax), fixNumbers),
	"bits.xor":           capped(arithmetic(magMax), fixNumbers),
	"bits.negate":        capped(arithmetic(magMax), fixNumbers),
	"bits.rsh":           capped(arithmetic(magMax), fixNumbers),
	"bits.lsh":           capped(checkShiftLeft, fixNumbers),
	"numbers.range":      capped(checkRange, fixRange),
	"numbers.range_step": capped(checkRange, fixRange),
	"units.parse":        capped(checkUnits, fixNumbers),
	"units.parse_bytes":  capped(checkUnits, fixNumbers),

	// Collections.
	"and":                       capped(elementsOf(0, 1), fixCollections),
	"or":                        capped(elementsOf(0, 1), fixCollections),
	"set_diff":                  capped(elementsOf(0), fixCollections),
	"intersection":              capped(nestedElements, fixCollections),
	"union":                     capped(nestedElements, fixCollections),
	"array.concat":              capped(elementsOf(0, 1), fixCollections),
	"array.flatten":             capped(nestedElements, fixCollections),
	"array.reverse":             capped(elementsOf(0), fixCollections),
	"cast_array":                capped(elementsOf(0), fixCollections),
	"cast_set":                  capped(elementsOf(0), fixCollections),
	"sort":                      capped(elementsOf(0), fixCollections),
	"object.keys":               capped(elementsOf(0), fixCollections),
	"object.remove":             capped(elementsOf(0, 1), fixCollections),
	"object.filter":             capped(elementsOf(0, 1), fixCollections),
	"object.union":              capped(checkObjectUnion, fixCollections),
	"object.union_n":            capped(checkObjectUnionN, fixCollections),
	"object.subset":             capped(checkObjectSubset, fixWork),
	"walk":                      capped(checkWalk, fixCollections),
	"json.filter":               capped(checkJSONFilter, fixCollections),
	"json.remove":               capped(checkJSONFilter, fixCollections),
	"json.patch":                capped(checkJSONPatch, fixCollections),
	"graph.reachable":           capped(checkReachable, fixWork),
	"net.cidr_contains_matches": capped(checkCIDRContainsMatches, fixWork),
	"net.cidr_merge":            capped(checkCIDRMerge, fixCollections),
	"net.cidr_contains":         capped(linear(8), fixText),
	"net.cidr_intersects":       capped(linear(8), fixText),
	"net.cidr_is_valid":         capped(linear(8), fixText),

	// Encodings.
	"json.marshal":              capped(checkJSONMarshal, fixEncode),
	"json.marshal_with_options": capped(checkJSONMarshalWithOptions, fixEncode),
	"yaml.marshal":              capped(checkYAMLMarshal, fixEncode),
	"json.unmarshal":            capped(checkJSONUnmarshal, fixDecode),
	"yaml.unmarshal":            capped(checkYAMLUnmarshal, fixDecode),
	"yaml.is_valid":             capped(checkYAMLUnmarshal, fixDecode),
	"json.is_valid":             constant("scans its argument without copying it, with a stack bounded by encoding/json's nesting limit of 10,000"),
	"base64.encode":             capped(linear(4), fixText),
	"base64.decode":             capped(linear(4), fixText),
	"base64.is_valid":           capped(linear(2), fixText),
	"base64url.encode":          capped(linear(4), fixText),
	"base64url.encode_no_pad":   capped(linear(4), fixText),
	"base64url.decode":          capped(linear(4), fixText),
	"hex.encode":                capped(linear(6), fixText),
	"hex.decode":                capped(linear(4), fixText),
	"urlquery.encode":           capped(linear(8), fixText),
	"urlquery.decode":           capped(linear(4), fixText),
	"urlquery.encode_object":    capped(checkURLQueryEncodeObject, fixEncode),
	"urlquery.decode_object":    capped(checkURLQueryDecodeObject, fixDecode),
	"uri.parse":                 capped(linear(8), fixText),
	"uri.is_valid":              capped(linear(8), fixText),
	"semver.compare":            capped(linear(8), fixText),
	"semver.is_valid":           capped(linear(8), fixText),

	// Time: numbers are converted through big floats; parsing and formatting quote their arguments in
	// errors or copy the layout.
	"time.add_date":          capped(checkNumberArgs, fixNumbers),
	"time.clock":             capped(checkNumberArgs, fixNumbers),
	"time.date":              capped(checkNumberArgs, fixNumbers),
	"time.diff":              capped(checkNumberArgs, fixNumbers),
	"time.weekday":           capped(checkNumberArgs, fixNumbers),
	"time.format":            capped(checkTimeFormat, fixText),
	"time.parse_ns":          capped(linear(quotedBytes), fixText),
	"time.parse_rfc3339_ns":  capped(linear(quotedBytes), fixText),
	"time.parse_duration_ns": capped(linear(quotedBytes), fixText),

	// Cryptography and tokens: parsed objects are larger than their encoding, like decoded JSON.
	"crypto.md5":                                constant(whyDigest),
	"crypto.sha1":                               constant(whyDigest),
	"crypto.sha256":                             constant(whyDigest),
	"crypto.hmac.md5":                           constant(whyDigest),
	"crypto.hmac.sha1":                          constant(whyDigest),
	"crypto.hmac.sha256":                        constant(whyDigest),
	"crypto.hmac.sha512":                        constant(whyDigest),
	"crypto.x509.parse_certificates":            capped(linear(unmarshalTokenBytes), fixDecode),
	"crypto.x509.parse_and_verify_certificates": capped(linear(unmarshalTokenBytes), fixDecode),
	"crypto.x509.parse_and_verify_certificates_with_options": capped(linear(unmarshalTokenBytes), fixDecode),
	"crypto.x509.parse_certificate_request":                  capped(linear(unmarshalTokenBytes), fixDecode),
	"crypto.x509.parse_keypair":                              capped(linear(unmarshalTokenBytes), fixDecode),
	"crypto.x509.parse_rsa_private_key":                      capped(linear(unmarshalTokenBytes), fixDecode),
	"crypto.parse_private_keys":                              capped(linear(unmarshalTokenBytes), fixDecode),
	"io.jwt.decode":                                          capped(linear(unmarshalTokenBytes), fixDecode),
	"io.jwt.verify_eddsa":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_es256":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_es384":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_es512":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_hs256":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_hs384":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_hs512":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_ps256":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_ps384":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_ps512":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_rs256":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_rs384":                                    capped(linear(16), fixDecode),
	"io.jwt.verify_rs512":                                    capped(linear(16), fixDecode),

	// Refused: their result cannot be bounded before the call, and no node policy needs them.
	"graph.reachable_paths":    refused("its result can hold exponentially many paths of the graph; use graph.reachable, which returns the reachable vertices"),
	"rego.parse_module":        refused("its result, the AST of a Rego module, is many times larger than the source; policies check Kubernetes objects, not Rego"),
	"providers.aws.sign_req":   refused("it signs requests for http.send, which policies may not call either"),
	"graphql.is_valid":         refused(graphqlRefusal),
	"graphql.parse":            refused(graphqlRefusal),
	"graphql.parse_and_verify": refused(graphqlRefusal),
	"graphql.parse_query":      refused(graphqlRefusal),
	"graphql.parse_schema":     refused(graphqlRefusal),
	"graphql.schema_is_valid":  refused(graphqlRefusal),
}

const graphqlRefusal = "GraphQL parsing and validation build ASTs many times larger than their input, and validation is super-linear; policies check Kubernetes objects, not GraphQL"

// refusedForSize reports whether builtinBounds refuses name, and why.
func refusedForSize(name string) (string, bool) {
	b, ok := builtinBounds[name]
	if !ok || b.class != classRefused {
		return "", false
	}
	return b.fix, true
}
