package convert

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Severity says whether a Finding needs the user to act.
type Severity int

const (
	// SeverityNote is a conversion that changed how a manifest reads without changing what it does,
	// such as an old default written out explicitly. The output is complete.
	SeverityNote Severity = iota
	// SeverityError is something that could not be converted, or was dropped because v1 has no
	// equivalent. The message says what to do; `joiner convert` exits 1.
	SeverityError
)

// String returns "note" or "error".
func (s Severity) String() string {
	if s == SeverityError {
		return "error"
	}
	return "note"
}

// Finding is one thing the conversion reports about an input field.
type Finding struct {
	Severity Severity
	// Source is the input's name: a file path, or "-" for standard input.
	Source string
	// Line is the 1-based line of the field in Source, or 0 when unknown.
	Line int
	// Object is the object as written in the input, "Kind/name".
	Object string
	// Field is the dotted path of the field in the input object, such as spec.ttlSecondsAfterEmpty; empty
	// for the object as a whole.
	Field string
	// Message says what happened and, for an error, what to do.
	Message string
}

// String renders the finding as "error: file.yaml:12: Provisioner/default spec.limits: message".
func (f Finding) String() string {
	var b strings.Builder
	b.WriteString(f.Severity.String())
	b.WriteString(": ")
	b.WriteString(displayName(f.Source))
	if f.Line > 0 {
		fmt.Fprintf(&b, ":%d", f.Line)
	}
	b.WriteString(": ")
	b.WriteString(f.Object)
	if f.Field != "" {
		b.WriteString(" ")
		b.WriteString(f.Field)
	}
	b.WriteString(": ")
	b.WriteString(f.Message)
	return b.String()
}

// displayName names an input in messages.
func displayName(source string) string {
	if source == stdinName {
		return "standard input"
	}
	return source
}

// reporter records the findings of one input object.
type reporter struct {
	source string
	// firstLine is the line of the input where the object's document starts.
	firstLine int
	object    string
	findings  *[]Finding
}

// line returns the input line of n, or 0.
func (r *reporter) line(n *yaml.Node) int {
	if n == nil || n.Line == 0 {
		return 0
	}
	return r.firstLine + n.Line - 1
}

// note records a SeverityNote finding about field, located at n.
func (r *reporter) note(n *yaml.Node, field, format string, args ...any) {
	r.add(SeverityNote, n, field, format, args...)
}

// fail records a SeverityError finding about field, located at n.
func (r *reporter) fail(n *yaml.Node, field, format string, args ...any) {
	r.add(SeverityError, n, field, format, args...)
}

func (r *reporter) add(s Severity, n *yaml.Node, field, format string, args ...any) {
	*r.findings = append(*r.findings, Finding{
		Severity: s, Source: r.source, Line: r.line(n), Object: r.object, Field: field,
		Message: fmt.Sprintf(format, args...),
	})
}

// unknown reports the fields of f that no conversion took: misplaced ones (their key is a field
// somewhere else in the same kind) with where they belong, others as unknown. Either way they are left
// out of the output.
func (r *reporter) unknown(f *fields, kind string) {
	for _, kv := range f.rest() {
		key := kv[0].Value
		field := f.field(key)
		if where := belongsAt(kind, key, field); len(where) > 0 {
			r.fail(kv[0], field, "misplaced: %s is not a field here, it belongs at %s; move it there and convert again (it was left out)",
				key, strings.Join(where, " or "))
			continue
		}
		r.fail(kv[0], field, "not a field of the %s, left out; remove it, or fix its name or indentation and convert again", kind)
	}
}
