package webhooks

import (
	"encoding/json"
	"fmt"

	"github.com/joiner-dev/joiner/jsonobject"
)

// Object is one object of an admission request (its object or its old object), decoded once and handed
// to every check of the request: its JSON is decoded into a map on first use, and a typed view (a
// karpv1.NodePool, a corev1.Pod, ...) is decoded on first use as well and then shared. An Object made
// from a map (ObjectFromMap) is not decoded at all; its JSON is encoded once, when a check needs it.
//
// An Object belongs to one request: it is not safe for concurrent use, and the checks must not modify
// what it returns (the defaulting handlers work on a copy).
type Object struct {
	raw     []byte
	hasRaw  bool
	content map[string]any
	err     error
	decoded bool
	// typed is the typed view, a pointer to the Go type of the last typedView call.
	typed  any
	counts Counts
}

// Counts says how often an Object turned JSON into Go values and back. A request whose checks share
// the Object decodes its JSON at most once into a map and at most once into each typed view.
type Counts struct {
	// MapDecodes counts decodings of the JSON into the map.
	MapDecodes int
	// TypedDecodes counts decodings of the JSON into a typed view.
	TypedDecodes int
	// Encodes counts encodings of the map into JSON (only for an Object made from a map).
	Encodes int
}

// NewObject returns the Object of a request's raw JSON. Nothing is decoded until a check asks.
func NewObject(raw []byte) *Object {
	return &Object{raw: raw, hasRaw: true}
}

// ObjectFromMap returns an Object that is already decoded into content, such as an object joiner check
// read and defaulted itself. content is shared, not copied; it must not change while the Object is in
// use.
func ObjectFromMap(content map[string]any) *Object {
	return &Object{content: content, decoded: true}
}

// Counts returns how often the Object has decoded and encoded its JSON so far.
func (o *Object) Counts() Counts { return o.counts }

// Content returns the object as a map, decoding the JSON on the first call. The error is
// jsonobject.Decode's.
func (o *Object) Content() (map[string]any, error) {
	if !o.decoded {
		o.decoded = true
		o.counts.MapDecodes++
		o.content, o.err = jsonobject.Decode(o.raw)
	}
	return o.content, o.err
}

// Raw returns the object's JSON: the request's bytes, or for an Object made from a map the map encoded
// on the first call.
func (o *Object) Raw() ([]byte, error) {
	if !o.hasRaw {
		o.counts.Encodes++
		raw, err := json.Marshal(o.content)
		if err != nil {
			return nil, fmt.Errorf("encode the object: %w", err)
		}
		o.raw, o.hasRaw = raw, true
	}
	return o.raw, nil
}

// typedView returns the object decoded into a T with encoding/json, decoding it on the first call for
// that type; later calls return the same value, which the checks must not modify. The error is
// json.Unmarshal's.
func typedView[T any](o *Object) (*T, error) {
	if t, ok := o.typed.(*T); ok {
		return t, nil
	}
	raw, err := o.Raw()
	if err != nil {
		return nil, err
	}
	o.counts.TypedDecodes++
	v := new(T)
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, err
	}
	o.typed = v
	return v, nil
}
