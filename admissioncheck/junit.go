package admissioncheck

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// JUnit XML, as the Jenkins JUnit schema describes it (testdata/junit.xsd).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	ClassName string        `xml:"classname,attr"`
	Skipped   *junitMessage `xml:"skipped"`
	Failure   *junitMessage `xml:"failure"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// writeJUnit prints the report as JUnit XML: one testsuite per file, in the order the files were read,
// one testcase per object (named Kind/name, with its source as class name). A denied object has a
// failure whose message is the apiserver's answer and whose text lists every problem; a skipped object
// is skipped; warnings and recorded violations go to system-out.
func writeJUnit(w io.Writer, rep *Report) error {
	out := junitSuites{Name: "joiner check"}
	index := map[string]int{}
	for _, o := range rep.Objects {
		file := fileOf(o)
		i, ok := index[file]
		if !ok {
			i = len(out.Suites)
			index[file] = i
			out.Suites = append(out.Suites, junitSuite{Name: file})
		}
		s := &out.Suites[i]
		c := junitCase{Name: objectName(o), ClassName: o.Source}
		var lines, notes []string
		for _, p := range sortedProblems(o) {
			line := p.Action + " " + p.Message
			if p.Action == ActionDeny || p.Action == ActionError {
				lines = append(lines, line)
			} else {
				notes = append(notes, line)
			}
		}
		switch {
		case o.Skipped:
			c.Skipped = &junitMessage{Message: o.SkipReason}
			s.Skipped++
		case !o.Allowed:
			c.Failure = &junitMessage{Message: o.Error, Type: "denied", Text: strings.Join(lines, "\n")}
			s.Failures++
			out.Failures++
		}
		if len(notes) > 0 {
			c.SystemOut = strings.Join(notes, "\n")
		}
		s.Cases = append(s.Cases, c)
		s.Tests++
		out.Tests++
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("encode JUnit XML: %w", err)
	}
	_, err := io.WriteString(w, "\n")
	return err
}
