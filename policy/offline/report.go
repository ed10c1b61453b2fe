package offline

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Output formats of a check's report (those of `joiner check` and `joiner policy check` build on them).
const (
	OutputText = "text"
	OutputJSON = "json"
)

// Finding is one line of a check's text report: what was found about one object.
type Finding struct {
	// Source, Kind, Namespace and Name say which object the line is about; Kind is empty when the
	// object has none.
	Source, Kind, Namespace, Name string
	// Action is the line's verdict as printed: deny, warn, dryrun or error.
	Action string
	// Message is what the cluster or the policy says, word for word.
	Message string
}

// CheckReport is a check's result as WriteText prints it: one line per finding then a summary line.
// `joiner check` and `joiner policy check` print their text reports through it.
type CheckReport interface {
	// Findings are the lines of the text report, in order.
	Findings() []Finding
	// SummaryLine is the text report's last line, without its newline.
	SummaryLine() string
}

// WriteText prints one line per finding, then the summary line:
//
//	<source> <Kind>/<namespace>/<name>: <action> <message>
func WriteText(w io.Writer, rep CheckReport) error {
	var b strings.Builder
	for _, f := range rep.Findings() {
		fmt.Fprintf(&b, "%s: %s %s\n", f.object(), f.Action, f.Message)
	}
	b.WriteString(rep.SummaryLine())
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// object names the finding's object: its source, then its kind and (namespace and) name when it has a
// kind.
func (f Finding) object() string {
	if f.Kind == "" {
		return f.Source
	}
	name := f.Name
	if f.Namespace != "" {
		name = f.Namespace + "/" + name
	}
	return f.Source + " " + f.Kind + "/" + name
}

// WriteJSON prints a report as indented JSON.
func WriteJSON(w io.Writer, rep any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
