package v1

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestNillableDurationJSONRoundTrip(t *testing.T) {
	tests := []struct {
		name      string
		in        string // JSON input
		wantErr   string // substring of the decode error; empty means success
		wantNever bool
		want      time.Duration // parsed length when not Never
		wantOut   string        // JSON written back
	}{
		{name: "never", in: `"Never"`, wantNever: true, wantOut: `"Never"`},
		{name: "hours", in: `"720h"`, want: 720 * time.Hour, wantOut: `"720h"`},
		{name: "hours and minutes stay verbatim", in: `"1h30m"`, want: 90 * time.Minute, wantOut: `"1h30m"`},
		{name: "minutes not normalised to hours", in: `"90m"`, want: 90 * time.Minute, wantOut: `"90m"`},
		{name: "zero seconds", in: `"0s"`, want: 0, wantOut: `"0s"`},
		{name: "canonical form kept", in: `"1h30m0s"`, want: 90 * time.Minute, wantOut: `"1h30m0s"`},
		{name: "not a duration", in: `"forever"`, wantErr: `invalid duration "forever"`},
		{name: "number without unit", in: `"10"`, wantErr: `invalid duration "10"`},
		{name: "empty string", in: `""`, wantErr: `invalid duration ""`},
		{name: "negative", in: `"-1h"`, wantErr: "must not be negative"},
		{name: "lower-case never", in: `"never"`, wantErr: `invalid duration "never"`},
		{name: "JSON number", in: `3600`, wantErr: "want a JSON string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d NillableDuration
			err := json.Unmarshal([]byte(tt.in), &d)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Unmarshal(%s) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.in, err)
			}
			if got := d.IsNever(); got != tt.wantNever {
				t.Errorf("IsNever() = %v, want %v", got, tt.wantNever)
			}
			if !tt.wantNever && (d.Duration == nil || *d.Duration != tt.want) {
				t.Errorf("Duration = %v, want %v", d.Duration, tt.want)
			}
			if d.IsZero() {
				t.Errorf("IsZero() = true for a decoded value")
			}
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(out) != tt.wantOut {
				t.Errorf("Marshal = %s, want %s", out, tt.wantOut)
			}
		})
	}
}

func TestNillableDurationMarshal(t *testing.T) {
	changed, err := ParseNillableDuration("1h30m")
	if err != nil {
		t.Fatalf("ParseNillableDuration: %v", err)
	}
	twoHours := 2 * time.Hour
	changed.Duration = &twoHours

	neverThenSet, err := ParseNillableDuration(Never)
	if err != nil {
		t.Fatalf("ParseNillableDuration: %v", err)
	}
	tenMinutes := 10 * time.Minute
	neverThenSet.Duration = &tenMinutes

	setThenCleared, err := ParseNillableDuration("720h")
	if err != nil {
		t.Fatalf("ParseNillableDuration: %v", err)
	}
	setThenCleared.Duration = nil

	tests := []struct {
		name     string
		in       NillableDuration
		wantJSON string
		wantZero bool
	}{
		{name: "built from a duration", in: NewNillableDuration(90 * time.Minute), wantJSON: `"1h30m0s"`},
		{name: "never", in: NeverDuration(), wantJSON: `"Never"`},
		{name: "zero value marshals as Never", in: NillableDuration{}, wantJSON: `"Never"`, wantZero: true},
		{name: "changed duration drops the stale raw string", in: changed, wantJSON: `"2h0m0s"`},
		{name: "Never changed to a duration", in: neverThenSet, wantJSON: `"10m0s"`},
		{name: "duration cleared to Never", in: setThenCleared, wantJSON: `"Never"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(out) != tt.wantJSON {
				t.Errorf("Marshal = %s, want %s", out, tt.wantJSON)
			}
			if got := tt.in.IsZero(); got != tt.wantZero {
				t.Errorf("IsZero() = %v, want %v", got, tt.wantZero)
			}
		})
	}
}

// TestNillableDurationOmitZero checks that an unset duration field is left out of the JSON (so the
// API server applies the CRD default) and that a set one, Never included, is written.
func TestNillableDurationOmitZero(t *testing.T) {
	tests := []struct {
		name string
		spec NodeClaimTemplateSpec
		want string
	}{
		{name: "unset is omitted", spec: NodeClaimTemplateSpec{}, want: ``},
		{name: "Never is written", spec: NodeClaimTemplateSpec{ExpireAfter: NeverDuration()}, want: `"expireAfter":"Never"`},
		{name: "duration is written", spec: NodeClaimTemplateSpec{ExpireAfter: NewNillableDuration(time.Hour)}, want: `"expireAfter":"1h0m0s"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := json.Marshal(tt.spec)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			has := strings.Contains(string(out), `"expireAfter"`)
			if tt.want == "" && has {
				t.Errorf("Marshal = %s, want no expireAfter", out)
			}
			if tt.want != "" && !strings.Contains(string(out), tt.want) {
				t.Errorf("Marshal = %s, want it to contain %s", out, tt.want)
			}
		})
	}
}

func TestNillableDurationNullLeavesUnset(t *testing.T) {
	d := NewNillableDuration(time.Hour)
	if err := json.Unmarshal([]byte(`null`), &d); err != nil {
		t.Fatalf("Unmarshal(null): %v", err)
	}
	if !d.IsZero() {
		t.Errorf("after null: IsZero() = false, value %v", d)
	}
}

func TestNillableDurationDeepCopyIsIndependent(t *testing.T) {
	orig, err := ParseNillableDuration("1h30m")
	if err != nil {
		t.Fatalf("ParseNillableDuration: %v", err)
	}
	cp := orig.DeepCopy()
	*cp.Duration = time.Minute
	if *orig.Duration != 90*time.Minute {
		t.Errorf("changing the copy changed the original to %v", *orig.Duration)
	}
	if got := orig.String(); got != "1h30m" {
		t.Errorf("original String() = %q, want %q", got, "1h30m")
	}
	if got := cp.String(); got != "1m0s" {
		t.Errorf("copy String() = %q, want %q", got, "1m0s")
	}
}

func TestNillableDurationEqual(t *testing.T) {
	parse := func(s string) NillableDuration {
		t.Helper()
		d, err := ParseNillableDuration(s)
		if err != nil {
			t.Fatalf("ParseNillableDuration(%q): %v", s, err)
		}
		return d
	}
	tests := []struct {
		name string
		a, b NillableDuration
		want bool
	}{
		{name: "same length written differently", a: parse("90m"), b: parse("1h30m"), want: true},
		{name: "parsed and built", a: parse("720h"), b: NewNillableDuration(720 * time.Hour), want: true},
		{name: "different lengths", a: parse("1h"), b: parse("2h"), want: false},
		{name: "both never", a: parse("Never"), b: NeverDuration(), want: true},
		{name: "never and a duration", a: NeverDuration(), b: parse("0s"), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.a.Equal(tt.b); got != tt.want {
				t.Errorf("%v.Equal(%v) = %v, want %v", tt.a, tt.b, got, tt.want)
			}
			if got := tt.b.Equal(tt.a); got != tt.want {
				t.Errorf("%v.Equal(%v) = %v, want %v", tt.b, tt.a, got, tt.want)
			}
		})
	}
}
