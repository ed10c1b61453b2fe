package policy

import (
	"bytes"
	"errors"
	"io"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"go.yaml.in/yaml/v3"
)

// checkYAMLUnmarshal bounds yaml.unmarshal and yaml.is_valid. Decoding allocates in proportion to the
// input, except that an alias (*name) expands to a copy of the node it names each time it appears, so a
// few lines of anchors and aliases stand for an exponential document; and go-yaml compares the keys of
// every mapping pairwise. When the input holds aliases, or enough keys for the pairwise checks to matter,
// it is parsed into nodes (without expanding aliases, in time and memory proportional to its length) to
// count what decoding would build. Numbers longer than MaxBuiltinNumberDigits are refused, as by
// json.unmarshal.
func checkYAMLUnmarshal(operands []*ast.Term) *BuiltinLimitError {
	s, ok := operands[0].Value.(ast.String)
	if !ok {
		return nil
	}
	base := satMul(int64(len(s)), yamlBytes)
	if le := firstLimit(memoryLimit(base), digitsLimit(longestDigitRun(string(s)))); le != nil {
		return le
	}
	keys := int64(strings.Count(string(s), ":"))
	if !strings.Contains(string(s), "*") && satMul(keys, keys) <= MaxBuiltinSteps {
		return nil
	}
	nodes, steps, ok := yamlExpansion(string(s))
	if !ok {
		return nil // does not parse: go-yaml reports the error
	}
	return firstLimit(memoryLimit(satAdd(base, satMul(nodes, yamlNodeBytes))), stepsLimit(steps))
}

// longestDigitRun returns the length of the longest run of digits in s: an upper bound of the longest
// number a YAML document holds.
func longestDigitRun(s string) int64 {
	var run, longest int64
	for i := 0; i < len(s); i++ {
		if s[i] >= '0' && s[i] <= '9' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// yamlExpansion parses every document of s into nodes and returns how many nodes decoding them builds,
// aliases expanded, and the pairwise key comparisons of their mappings.
func yamlExpansion(s string) (nodes, steps int64, ok bool) {
	dec := yaml.NewDecoder(bytes.NewReader([]byte(s)))
	e := &yamlExpander{memo: map[*yaml.Node][2]int64{}}
	for {
		var doc yaml.Node
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return nodes, steps, true
			}
			return 0, 0, false
		}
		n, st := e.size(&doc, 0)
		nodes, steps = satAdd(nodes, n), satAdd(steps, st)
	}
}

// yamlExpander computes expanded sizes, memoized per node: a node reached through several aliases is
// counted once per alias but computed once.
type yamlExpander struct {
	memo map[*yaml.Node][2]int64
}

// size returns the nodes and key comparisons decoding n builds. depth guards against alias cycles, which
// go-yaml rejects.
func (e *yamlExpander) size(n *yaml.Node, depth int) (int64, int64) {
	if n == nil || depth > 10_000 {
		return 0, 0
	}
	if r, ok := e.memo[n]; ok {
		return r[0], r[1]
	}
	nodes, steps := int64(1), int64(0)
	if n.Kind == yaml.AliasNode {
		nodes, steps = e.size(n.Alias, depth+1)
		nodes++
	}
	for _, c := range n.Content {
		cn, cs := e.size(c, depth+1)
		nodes, steps = satAdd(nodes, cn), satAdd(steps, cs)
	}
	if n.Kind == yaml.MappingNode {
		pairs := int64(len(n.Content) / 2)
		steps = satAdd(steps, satMul(pairs, pairs))
	}
	e.memo[n] = [2]int64{nodes, steps}
	return nodes, steps
}
