package convert

import (
	"encoding/json"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// YAML tags of the scalars this package writes.
const (
	tagStr = "!!str"
	tagInt = "!!int"
	tagMap = "!!map"
	tagSeq = "!!seq"
)

// str returns a string scalar node.
func str(v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tagStr, Value: v} }

// integer returns an integer scalar node.
func integer(v int64) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tagInt, Value: strconv.FormatInt(v, 10)}
}

// newMap returns an empty block mapping node.
func newMap() *yaml.Node { return &yaml.Node{Kind: yaml.MappingNode, Tag: tagMap} }

// newSeq returns an empty block sequence node.
func newSeq() *yaml.Node { return &yaml.Node{Kind: yaml.SequenceNode, Tag: tagSeq} }

// isMap reports whether n is a mapping node.
func isMap(n *yaml.Node) bool { return n != nil && n.Kind == yaml.MappingNode }

// isSeq reports whether n is a sequence node.
func isSeq(n *yaml.Node) bool { return n != nil && n.Kind == yaml.SequenceNode }

// isScalar reports whether n is a scalar node.
func isScalar(n *yaml.Node) bool { return n != nil && n.Kind == yaml.ScalarNode }

// lookup returns the key and value nodes of key in the mapping m, or nils.
func lookup(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if !isMap(m) {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i], m.Content[i+1]
		}
	}
	return nil, nil
}

// value returns the value node of key in the mapping m, or nil.
func value(m *yaml.Node, key string) *yaml.Node {
	_, v := lookup(m, key)
	return v
}

// scalarAt returns the scalar value of key in the mapping m, or "".
func scalarAt(m *yaml.Node, key string) string {
	if v := value(m, key); isScalar(v) {
		return v.Value
	}
	return ""
}

// set puts key: v into the mapping m, replacing the value of an existing key, else appending the pair.
func set(m *yaml.Node, key string, v *yaml.Node) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content[i+1] = v
			return
		}
	}
	m.Content = append(m.Content, str(key), v)
}

// put appends a pair whose key node is k (renamed to key, keeping its comments) to the mapping m, or
// a fresh key node when k is nil.
func put(m *yaml.Node, k *yaml.Node, key string, v *yaml.Node) {
	if k == nil {
		k = str(key)
	} else {
		k.Value = key
	}
	m.Content = append(m.Content, k, v)
}

// remove deletes key from the mapping m and returns its key and value nodes, or nils.
func remove(m *yaml.Node, key string) (*yaml.Node, *yaml.Node) {
	if !isMap(m) {
		return nil, nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			k, v := m.Content[i], m.Content[i+1]
			m.Content = append(m.Content[:i:i], m.Content[i+2:]...)
			return k, v
		}
	}
	return nil, nil
}

// child returns the mapping at key in m, creating it (after the existing pairs) when absent.
func child(m *yaml.Node, key string) *yaml.Node {
	if v := value(m, key); isMap(v) {
		return v
	}
	c := newMap()
	set(m, key, c)
	return c
}

// deepCopy returns a copy of n that shares no node with it.
func deepCopy(n *yaml.Node) *yaml.Node {
	if n == nil {
		return nil
	}
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, k := range n.Content {
		c.Content[i] = deepCopy(k)
	}
	c.Alias = deepCopy(n.Alias)
	return &c
}

// canonical renders the data of n (comments and styles aside) as JSON with sorted keys, to compare
// two nodes by what they mean.
func canonical(n *yaml.Node) (string, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return "", fmt.Errorf("decode line %d: %w", n.Line, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("line %d: %w", n.Line, err)
	}
	return string(b), nil
}

// fields reads a mapping node key by key and remembers which keys were taken, so that whatever is left
// can be reported as unknown or misplaced. It tracks key nodes, not names: a conversion may rename a
// key node it moves to the output.
type fields struct {
	node *yaml.Node
	// path is the dotted path of node in its object ("" for the root).
	path  string
	taken map[*yaml.Node]bool
}

// fieldsOf starts reading the mapping n found at path. A nil or non-mapping n has no fields.
func fieldsOf(n *yaml.Node, path string) *fields {
	if !isMap(n) {
		n = nil
	}
	return &fields{node: n, path: path, taken: map[*yaml.Node]bool{}}
}

// take returns the key and value nodes of key (nils when absent) and marks it taken.
func (f *fields) take(key string) (*yaml.Node, *yaml.Node) {
	k, v := lookup(f.node, key)
	if k != nil {
		f.taken[k] = true
	}
	return k, v
}

// skip marks keys taken without reading them.
func (f *fields) skip(keys ...string) {
	for _, key := range keys {
		f.take(key)
	}
}

// copyTo puts the keys that are present, with their values as they are, into out.
func (f *fields) copyTo(out *yaml.Node, keys ...string) {
	for _, key := range keys {
		if k, v := f.take(key); v != nil {
			put(out, k, key, v)
		}
	}
}

// field returns the dotted path of key under this mapping.
func (f *fields) field(key string) string { return joinPath(f.path, key) }

// rest returns the key nodes (each followed by its value) that were not taken, in document order.
func (f *fields) rest() [][2]*yaml.Node {
	if f.node == nil {
		return nil
	}
	var out [][2]*yaml.Node
	for i := 0; i+1 < len(f.node.Content); i += 2 {
		if !f.taken[f.node.Content[i]] {
			out = append(out, [2]*yaml.Node{f.node.Content[i], f.node.Content[i+1]})
		}
	}
	return out
}

// joinPath appends key to a dotted path.
func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
