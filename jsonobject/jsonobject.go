// Package jsonobject decodes raw JSON that must be exactly one JSON object, the way both the
// admission webhooks (admitted objects) and ProvisioningPolicy parameters need it: numbers are
// kept as json.Number so that their exact text survives a round trip, and anything after the
// object is an error. Its errors are typed so that each caller can word the message for its own
// users.
//
// It only decodes: it knows nothing of Kubernetes kinds or policies, and never changes its input.
package jsonobject

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// TrailingDataError is returned when more JSON or other data follows the object.
type TrailingDataError struct{}

// Error says that something follows the object.
func (*TrailingDataError) Error() string { return "trailing data after the object" }

// InvalidJSONError is returned when the input is not valid JSON. Its message is the decoder's.
type InvalidJSONError struct {
	// Err is the error of encoding/json.
	Err error
}

// Error returns the decoder's message.
func (e *InvalidJSONError) Error() string { return e.Err.Error() }

// Unwrap returns the decoder's error.
func (e *InvalidJSONError) Unwrap() error { return e.Err }

// NotObjectError is returned when the input is valid JSON but not an object.
type NotObjectError struct {
	// Kind names what the input was instead, as KindOf words it ("an array", "null", ...).
	Kind string
}

// Error says what the input was instead of an object.
func (e *NotObjectError) Error() string { return "want an object, got " + e.Kind }

// Decode decodes raw, which must hold a single JSON object (surrounding whitespace is fine).
// Numbers come back as json.Number. The error is an *InvalidJSONError, a *TrailingDataError or a
// *NotObjectError.
func Decode(raw []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &InvalidJSONError{Err: err}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, &TrailingDataError{}
	}
	m, ok := v.(map[string]any)
	if !ok || m == nil {
		return nil, &NotObjectError{Kind: KindOf(v)}
	}
	return m, nil
}

// KindOf names the kind of a value decoded from JSON for messages: "an object", "an array",
// "a string", "a number", "a boolean" or "null". Values JSON decoding does not produce are named
// by their Go type.
func KindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}
