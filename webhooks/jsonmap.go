package webhooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// decodeJSONObject decodes raw JSON that must be a single object. Numbers are kept as json.Number so that
// re-encoding a defaulted object reproduces them exactly.
func decodeJSONObject(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("decode JSON: trailing data after the object")
	}
	m, ok := v.(map[string]any)
	if !ok || m == nil {
		return nil, fmt.Errorf("decode JSON: want an object, got %s", jsonKind(v))
	}
	return m, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

// absent reports whether m has no value for key, or JSON null. The API server prunes nulls of
// non-nullable fields before it applies schema defaults, so null is defaulted like a missing field.
func absent(m map[string]any, key string) bool {
	v, ok := m[key]
	return !ok || v == nil
}

// setDefault sets m[key] to value when key is absent and reports whether it did.
func setDefault(m map[string]any, key string, value any) bool {
	if !absent(m, key) {
		return false
	}
	m[key] = value
	return true
}

// childObject returns m[key] when it is an object. It returns false when the key is absent or holds
// another type; a value of the wrong type is left for schema validation to reject.
func childObject(m map[string]any, key string) (map[string]any, bool) {
	c, ok := m[key].(map[string]any)
	return c, ok && c != nil
}

// ensureObject returns m[key], creating an empty object when the key is absent (or null). It returns
// false, without touching m, when the key holds something other than an object.
func ensureObject(m map[string]any, key string) (map[string]any, bool) {
	if absent(m, key) {
		c := map[string]any{}
		m[key] = c
		return c, true
	}
	return childObject(m, key)
}

// objectAt follows a path of object keys from m.
func objectAt(m map[string]any, path ...string) (map[string]any, bool) {
	cur := m
	for _, k := range path {
		next, ok := childObject(cur, k)
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// stringAt returns m[key] when it is a string.
func stringAt(m map[string]any, key string) string {
	s, _ := m[key].(string)
	return s
}
