package webhooks

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

// fieldDefault is the default value of one field of an object.
type fieldDefault struct {
	key   string
	value any
}

// defaultObject makes m[key] an object, creating an empty one when the key is absent (or null), and
// sets each of its absent fields to its default. It returns the object, nil when m[key] holds something
// other than an object (left for schema validation to reject), and whether it changed anything.
func defaultObject(m map[string]any, key string, defaults ...fieldDefault) (map[string]any, bool) {
	changed := absent(m, key)
	obj, ok := ensureObject(m, key)
	if !ok {
		return nil, changed
	}
	for _, d := range defaults {
		changed = setDefault(obj, d.key, d.value) || changed
	}
	return obj, changed
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
