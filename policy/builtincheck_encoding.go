package policy

import (
	"unicode/utf8"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Estimated allocations of the JSON and YAML builtins, checked against measurements by
// TestBuiltinEstimatesBoundAllocations.
const (
	// marshalBytes is allocated per byte of JSON output (encoder buffer growth, the copy into a string)
	// and marshalNodeBytes per value (the intermediate Go value ast.JSON builds).
	marshalBytes     = 8
	marshalNodeBytes = 128
	// unmarshalTokenBytes is allocated per JSON value or object member (the decoded Go value and its AST)
	// and unmarshalBytes per input byte (string contents, copied twice).
	unmarshalTokenBytes = 384
	unmarshalBytes      = 4
	// yamlBytes is allocated per byte of YAML input (measured at 127 for a list of numbers) and
	// yamlNodeBytes per node an alias expands to.
	yamlBytes     = 384
	yamlNodeBytes = 768
	// yamlMarshalBytes is allocated per byte of the JSON form of yaml.marshal's argument: it is encoded as
	// JSON, parsed as YAML and encoded again.
	yamlMarshalBytes = 384
)

// jsonMeasure computes the length of a value's JSON encoding, with the indentation of
// json.marshal_with_options, without encoding it. It stops counting past limit.
type jsonMeasure struct {
	prefix, indent int64 // lengths; pretty printing when pretty is set
	pretty         bool
	limit          int64
	n              int64 // output bytes
	nodes          int64 // values
	steps          int64 // sum of the squares of the objects' sizes (YAML checks mapping keys pairwise)
}

// measure walks v at depth.
func (m *jsonMeasure) measure(v ast.Value, depth int64) {
	if m.n > m.limit {
		return
	}
	m.nodes++
	switch x := v.(type) {
	case ast.String:
		m.n += jsonStringLen(string(x))
	case ast.Number:
		m.n += int64(len(x))
	case ast.Boolean:
		m.n += 5
	case ast.Null:
		m.n += 4
	case *ast.Array:
		m.container(x.Len(), depth)
		x.Foreach(func(t *ast.Term) { m.element(depth); m.measure(t.Value, depth+1) })
	case ast.Set:
		m.container(x.Len(), depth)
		x.Foreach(func(t *ast.Term) { m.element(depth); m.measure(t.Value, depth+1) })
	case ast.Object:
		m.container(x.Len(), depth)
		m.steps = satAdd(m.steps, satMul(int64(x.Len()), int64(x.Len())))
		x.Foreach(func(k, t *ast.Term) {
			m.element(depth)
			if s, ok := k.Value.(ast.String); ok {
				m.n += jsonStringLen(string(s))
			} else {
				m.n += printedSize(k.Value) + 2
			}
			m.n += 2 // ": "
			m.measure(t.Value, depth+1)
		})
	default:
		m.n += printedSize(v)
	}
}

// container counts the brackets of a collection of size elements at depth, and its closing line.
func (m *jsonMeasure) container(size int, depth int64) {
	m.n += 2
	if m.pretty && size > 0 {
		m.n = satAdd(m.n, satAdd(1+m.prefix, satMul(m.indent, depth)))
	}
	if size > 0 {
		m.n += int64(size) // separators
	}
}

// element counts the line an element starts on when pretty printing.
func (m *jsonMeasure) element(depth int64) {
	if m.pretty {
		m.n = satAdd(m.n, satAdd(1+m.prefix, satMul(m.indent, depth+1)))
	}
}

// jsonStringLen returns the length of s as a JSON string by encoding/json: quotes, two-byte escapes,
// \u escapes for other control characters, <, >, &, U+2028 and U+2029, and \ufffd for invalid UTF-8.
func jsonStringLen(s string) int64 {
	n := int64(2)
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				n += 6
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && size == 1) || r == '\u2028' || r == '\u2029' {
			n += 6
		} else {
			n += int64(size)
		}
		i += size
	}
	return n
}

// measureJSON measures v with the given pretty-printing options.
func measureJSON(v ast.Value, pretty bool, prefix, indent int64) *jsonMeasure {
	m := &jsonMeasure{pretty: pretty, prefix: prefix, indent: indent, limit: MaxBuiltinAllocBytes}
	m.measure(v, 0)
	if pretty {
		m.n = satAdd(m.n, prefix)
	}
	return m
}

// marshalLimit bounds a JSON encoding of m's size: its string and what building it allocates.
func marshalLimit(m *jsonMeasure) *BuiltinLimitError {
	return firstLimit(stringLimit(m.n), memoryLimit(satAdd(satMul(m.n, marshalBytes), satMul(m.nodes, marshalNodeBytes))))
}

// checkJSONMarshal bounds json.marshal.
func checkJSONMarshal(operands []*ast.Term) *BuiltinLimitError {
	return marshalLimit(measureJSON(operands[0].Value, false, 0, 0))
}

// checkJSONMarshalWithOptions bounds json.marshal_with_options(x, {"indent", "prefix", "pretty"}): the
// indent is repeated once per level of nesting on every line, so a long indent multiplies the output.
func checkJSONMarshalWithOptions(operands []*ast.Term) *BuiltinLimitError {
	opts, ok := operands[1].Value.(ast.Object)
	if !ok {
		return nil
	}
	indent, prefix := int64(1), int64(0) // OPA's default indent is a tab
	implicit, explicit, pretty := false, false, false
	valid := true
	opts.Foreach(func(k, v *ast.Term) {
		key, _ := k.Value.(ast.String)
		switch key {
		case "indent", "prefix":
			s, ok := v.Value.(ast.String)
			valid = valid && ok
			if key == "indent" {
				indent = int64(len(s))
			} else {
				prefix = int64(len(s))
			}
			implicit = true
		case "pretty":
			b, ok := v.Value.(ast.Boolean)
			valid = valid && ok
			explicit, pretty = true, bool(b)
		default:
			valid = false
		}
	})
	if !valid {
		return nil
	}
	if !explicit {
		pretty = implicit
	}
	return marshalLimit(measureJSON(operands[0].Value, pretty, prefix, indent))
}

// checkYAMLMarshal bounds yaml.marshal: OPA encodes the value as JSON, parses that as YAML (checking the
// keys of each mapping pairwise) and encodes the result as YAML, at most about twice the JSON's size.
func checkYAMLMarshal(operands []*ast.Term) *BuiltinLimitError {
	m := measureJSON(operands[0].Value, true, 0, 2)
	return firstLimit(stringLimit(satMul(m.n, 2)), memoryLimit(satMul(m.n, yamlMarshalBytes)), stepsLimit(m.steps))
}

// jsonTokens counts the values and object members of a JSON text, an upper bound of what decoding it
// builds (separators, colons and opening brackets outside strings, plus one), and returns the length of
// its longest number.
func jsonTokens(s string) (tokens, longestNumber int64) {
	tokens = 1
	inString, escaped := false, false
	var run int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !inString && (c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			run++
			longestNumber = max(longestNumber, run)
			continue
		}
		run = 0
		switch {
		case inString && escaped:
			escaped = false
		case inString && c == '\\':
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':' || c == '[' || c == '{'):
			tokens++
		}
	}
	return tokens, longestNumber
}

// checkJSONUnmarshal bounds json.unmarshal by the values its input holds. A number longer than
// MaxBuiltinNumberDigits is refused too: every later comparison or conversion of it is quadratic in its
// length.
func checkJSONUnmarshal(operands []*ast.Term) *BuiltinLimitError {
	s, ok := operands[0].Value.(ast.String)
	if !ok {
		return nil
	}
	tokens, longest := jsonTokens(string(s))
	return firstLimit(digitsLimit(longest),
		memoryLimit(satAdd(satMul(tokens, unmarshalTokenBytes), satMul(int64(len(s)), unmarshalBytes))))
}
