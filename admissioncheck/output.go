package admissioncheck

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/joiner-dev/joiner/policy/offline"
)

// Output formats of a report (Config.Output).
const (
	// OutputText is the human report, one line per problem and a summary line; OutputHuman is its name
	// on the command line.
	OutputText  = offline.OutputText
	OutputHuman = "human"
	// OutputJSON is the Report as indented JSON.
	OutputJSON = offline.OutputJSON
	// OutputJUnit is JUnit XML: one testsuite per file, one testcase per object.
	OutputJUnit = "junit"
	// OutputSARIF is a SARIF 2.1.0 log: one result per problem.
	OutputSARIF = "sarif"
	// OutputGitHub is GitHub Actions workflow commands (::error file=F,line=L::message).
	OutputGitHub = "github"
	// OutputGitLab is a GitLab Code Quality report.
	OutputGitLab = "gitlab"
)

// outputs are the accepted formats, in the order the usage lists them.
var outputs = []string{OutputHuman, OutputJSON, OutputJUnit, OutputSARIF, OutputGitHub, OutputGitLab}

// Exit codes of a check.
const (
	// ExitAllowed: the cluster would admit every object judged (warnings included).
	ExitAllowed = 0
	// ExitDenied: the cluster would refuse an object, or the check cannot judge one.
	ExitDenied = 1
	// ExitUsage: bad flags, unreadable or invalid input, no objects, a report that cannot be written.
	ExitUsage = 2
)

// CheckOutput returns an error unless output is a format WriteReport writes (empty is OutputText).
func CheckOutput(output string) error {
	if output == "" || output == OutputText || slices.Contains(outputs, output) {
		return nil
	}
	return fmt.Errorf("output %q is not supported; use %s", output, strings.Join(outputs, ", "))
}

// WriteReport writes rep to w in output and returns the check's exit code (Report.ExitCode); a report
// that cannot be written is an error with ExitUsage.
func WriteReport(w io.Writer, output string, rep *Report) (int, error) {
	var err error
	switch output {
	case "", OutputText, OutputHuman:
		err = offline.WriteText(w, rep)
	case OutputJSON:
		err = offline.WriteJSON(w, rep)
	case OutputJUnit:
		err = writeJUnit(w, rep)
	case OutputSARIF:
		err = writeSARIF(w, rep)
	case OutputGitHub:
		err = writeGitHub(w, rep)
	case OutputGitLab:
		err = writeGitLab(w, rep)
	default:
		err = CheckOutput(output)
	}
	if err != nil {
		return ExitUsage, fmt.Errorf("write report: %w", err)
	}
	return rep.ExitCode(), nil
}

// sortedProblems are an object's problems as the text report orders them: errors, denials, warnings,
// then what is only recorded.
func sortedProblems(o Result) []Problem {
	problems := slices.Clone(o.Problems)
	slices.SortStableFunc(problems, func(a, b Problem) int { return rank(a.Action) - rank(b.Action) })
	return problems
}

// objectName is "Kind/name" or "Kind/namespace/name", or the source when the object has no kind.
func objectName(o Result) string {
	if o.Kind == "" {
		return o.Source
	}
	if o.Namespace != "" {
		return o.Kind + "/" + o.Namespace + "/" + o.Name
	}
	return o.Kind + "/" + o.Name
}

// fileOf is the file an object was read from, its source when that is not known.
func fileOf(o Result) string {
	if o.File != "" {
		return o.File
	}
	return o.Source
}

// ruleID names what gave a problem: the policy, else the check (the webhook, "apiserver", "kind").
func ruleID(p Problem) string {
	if p.Policy != "" {
		return p.Policy
	}
	return p.By
}

// lineOf is the object's line, at least 1 (the reports that need one point at the file's start).
func lineOf(o Result) int { return max(o.Line, 1) }

// writeGitHub prints one GitHub Actions workflow command per problem: ::error for denials and errors,
// ::warning for warnings, ::notice for what is only recorded. Messages are never cut.
func writeGitHub(w io.Writer, rep *Report) error {
	var b strings.Builder
	for _, o := range rep.Objects {
		for _, p := range sortedProblems(o) {
			cmd := map[string]string{ActionError: "error", ActionDeny: "error", ActionWarn: "warning"}[p.Action]
			if cmd == "" {
				cmd = "notice"
			}
			fmt.Fprintf(&b, "::%s file=%s,line=%d,title=%s::%s\n", cmd, githubProperty(fileOf(o)), lineOf(o),
				githubProperty(objectName(o)+" "+ruleID(p)), githubData(p.Message))
		}
	}
	b.WriteString(rep.SummaryLine())
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// githubData escapes a workflow command's message; githubProperty a property's value.
func githubData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func githubProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// gitlabIssue is one entry of a GitLab Code Quality report.
type gitlabIssue struct {
	Description string         `json:"description"`
	CheckName   string         `json:"check_name"`
	Fingerprint string         `json:"fingerprint"`
	Severity    string         `json:"severity"`
	Location    gitlabLocation `json:"location"`
}

type gitlabLocation struct {
	Path  string      `json:"path"`
	Lines gitlabLines `json:"lines"`
}

type gitlabLines struct {
	Begin int `json:"begin"`
}

// gitlabSeverity maps a problem's action to a Code Quality severity.
var gitlabSeverity = map[string]string{ActionError: "critical", ActionDeny: "major", ActionWarn: "minor", ActionDryRun: "info"}

// writeGitLab prints a GitLab Code Quality report: a JSON array with one issue per problem, whose
// fingerprint is stable across runs (file, object, check and message).
func writeGitLab(w io.Writer, rep *Report) error {
	issues := []gitlabIssue{}
	for _, o := range rep.Objects {
		for _, p := range sortedProblems(o) {
			sum := sha256.Sum256([]byte(strings.Join([]string{fileOf(o), objectName(o), ruleID(p), p.Action, p.Message}, "\x00")))
			issues = append(issues, gitlabIssue{
				Description: objectName(o) + ": " + p.Message, CheckName: ruleID(p),
				Fingerprint: hex.EncodeToString(sum[:]), Severity: gitlabSeverity[p.Action],
				Location: gitlabLocation{Path: fileOf(o), Lines: gitlabLines{Begin: lineOf(o)}},
			})
		}
	}
	return offline.WriteJSON(w, issues)
}
