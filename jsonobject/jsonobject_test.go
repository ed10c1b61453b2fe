package jsonobject

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

func TestDecode(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		want    map[string]any
		wantErr string // the error's message; empty means no error
		check   func(error) bool
	}{
		{name: "empty object", raw: `{}`, want: map[string]any{}},
		{
			name: "numbers keep their text",
			raw:  ` {"big": 12345678901234567890, "f": 1.50, "nested": {"a": [1, "x", true, null]}} ` + "\n",
			want: map[string]any{
				"big":    json.Number("12345678901234567890"),
				"f":      json.Number("1.50"),
				"nested": map[string]any{"a": []any{json.Number("1"), "x", true, nil}},
			},
		},
		{
			name: "empty input", raw: ``, wantErr: "EOF",
			check: func(err error) bool { var e *InvalidJSONError; return errors.As(err, &e) },
		},
		{
			name: "truncated", raw: `{"a":`, wantErr: "unexpected EOF",
			check: func(err error) bool { var e *InvalidJSONError; return errors.As(err, &e) },
		},
		{
			name: "trailing object", raw: `{} {}`, wantErr: "trailing data after the object",
			check: func(err error) bool { var e *TrailingDataError; return errors.As(err, &e) },
		},
		{
			name: "trailing garbage", raw: `{"a": 1} x`, wantErr: "trailing data after the object",
			check: func(err error) bool { var e *TrailingDataError; return errors.As(err, &e) },
		},
		{name: "array", raw: `[1, 2]`, wantErr: "want an object, got an array", check: isNotObject("an array")},
		{name: "string", raw: `"x"`, wantErr: "want an object, got a string", check: isNotObject("a string")},
		{name: "number", raw: `7`, wantErr: "want an object, got a number", check: isNotObject("a number")},
		{name: "boolean", raw: `false`, wantErr: "want an object, got a boolean", check: isNotObject("a boolean")},
		{name: "null", raw: `null`, wantErr: "want an object, got null", check: isNotObject("null")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode([]byte(tc.raw))
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				if !reflect.DeepEqual(got, tc.want) {
					t.Errorf("Decode = %#v, want %#v", got, tc.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Decode = %#v, want error %q", got, tc.wantErr)
			}
			if err.Error() != tc.wantErr {
				t.Errorf("Decode error = %q, want %q", err.Error(), tc.wantErr)
			}
			if tc.check != nil && !tc.check(err) {
				t.Errorf("Decode error %#v is not of the expected type", err)
			}
		})
	}
}

// isNotObject checks for a *NotObjectError naming kind.
func isNotObject(kind string) func(error) bool {
	return func(err error) bool {
		var e *NotObjectError
		return errors.As(err, &e) && e.Kind == kind
	}
}

func TestInvalidJSONErrorUnwraps(t *testing.T) {
	_, err := Decode([]byte(`{"a" 1}`))
	var syntax *json.SyntaxError
	if !errors.As(err, &syntax) {
		t.Fatalf("Decode error %#v does not unwrap to *json.SyntaxError", err)
	}
}

func TestKindOf(t *testing.T) {
	cases := []struct {
		value any
		want  string
	}{
		{value: nil, want: "null"},
		{value: map[string]any{}, want: "an object"},
		{value: []any{}, want: "an array"},
		{value: "s", want: "a string"},
		{value: json.Number("1"), want: "a number"},
		{value: 1.5, want: "a number"},
		{value: true, want: "a boolean"},
		{value: struct{}{}, want: "struct {}"},
	}
	for _, tc := range cases {
		if got := KindOf(tc.value); got != tc.want {
			t.Errorf("KindOf(%#v) = %q, want %q", tc.value, got, tc.want)
		}
	}
}
