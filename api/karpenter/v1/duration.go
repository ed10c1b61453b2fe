package v1

import (
	"encoding/json"
	"fmt"
	"time"
)

// Never is the value of a NillableDuration that never elapses, as written in YAML ("expireAfter: Never").
const Never = "Never"

// NillableDuration is a duration that may also be "Never". In JSON it is a string: "Never" or a Go
// duration such as "720h" or "1h30m" (the CRD schema only admits whole s/m/h components).
//
// A value decoded from JSON remembers the string the user wrote and marshals it back verbatim, so
// "1h30m" stays "1h30m" instead of becoming "1h30m0s" and GitOps tools (Flux, Argo CD) see no drift.
// If Duration is changed afterwards, the remembered string no longer matches and the new value is
// written in canonical form instead.
//
// The zero value means "not set": fields of this type carry `omitzero`, so a Go client that leaves
// them unset lets the API server apply the CRD default. Use NeverDuration for an explicit "Never".
//
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Pattern=`^(([0-9]+(s|m|h))+|Never)$`
type NillableDuration struct {
	// Duration is the parsed length. Nil means Never (or, in the zero value, not set).
	Duration *time.Duration

	// raw is the exact string this value was decoded or parsed from ("" when built in Go).
	raw string
}

// NewNillableDuration returns a NillableDuration of length d. It marshals as d.String().
func NewNillableDuration(d time.Duration) NillableDuration {
	return NillableDuration{Duration: &d}
}

// NeverDuration returns the NillableDuration "Never".
func NeverDuration() NillableDuration {
	return NillableDuration{raw: Never}
}

// ParseNillableDuration parses "Never" or a non-negative Go duration string ("720h", "1h30m") and
// remembers s so that it marshals back unchanged.
func ParseNillableDuration(s string) (NillableDuration, error) {
	if s == Never {
		return NeverDuration(), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return NillableDuration{}, fmt.Errorf("invalid duration %q: use %q or a duration such as \"720h\" or \"1h30m\": %w", s, Never, err)
	}
	if d < 0 {
		return NillableDuration{}, fmt.Errorf("invalid duration %q: must not be negative; use %q or a duration such as \"720h\"", s, Never)
	}
	return NillableDuration{Duration: &d, raw: s}, nil
}

// IsZero reports whether the value is unset (neither a duration nor "Never"). encoding/json uses it
// for `omitzero`.
func (d NillableDuration) IsZero() bool {
	return d.Duration == nil && d.raw == ""
}

// IsNever reports whether the duration never elapses. An unset value also reports true, because
// it carries no deadline.
func (d NillableDuration) IsNever() bool {
	return d.Duration == nil
}

// Equal reports whether d and other mean the same length (or are both Never), whatever strings
// they were written as: "90m" equals "1h30m". go-cmp uses it.
func (d NillableDuration) Equal(other NillableDuration) bool {
	if d.Duration == nil || other.Duration == nil {
		return d.Duration == nil && other.Duration == nil
	}
	return *d.Duration == *other.Duration
}

// String returns the value as it is written to JSON: the remembered string when it still matches,
// otherwise "Never" or the canonical duration.
func (d NillableDuration) String() string {
	if d.raw != "" && d.rawMatches() {
		return d.raw
	}
	if d.Duration == nil {
		return Never
	}
	return d.Duration.String()
}

// rawMatches reports whether the remembered string still denotes the current Duration.
func (d NillableDuration) rawMatches() bool {
	if d.raw == Never {
		return d.Duration == nil
	}
	parsed, err := time.ParseDuration(d.raw)
	return err == nil && d.Duration != nil && parsed == *d.Duration
}

// MarshalJSON writes the value as a JSON string (see String). The zero value is written as "Never",
// as in Karpenter; fields tagged `omitzero` omit it instead.
func (d NillableDuration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.String())
}

// UnmarshalJSON reads a JSON string holding "Never" or a duration. JSON null leaves the value unset.
func (d *NillableDuration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*d = NillableDuration{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("decode duration: want a JSON string such as \"720h\" or %q, got %s: %w", Never, b, err)
	}
	parsed, err := ParseNillableDuration(s)
	if err != nil {
		return fmt.Errorf("decode duration: %w", err)
	}
	*d = parsed
	return nil
}
