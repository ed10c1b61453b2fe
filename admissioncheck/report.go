package admissioncheck

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/offline"
)

// Actions of a Problem.
const (
	// ActionDeny is a problem that makes the cluster refuse the object.
	ActionDeny = "deny"
	// ActionWarn is a warning the cluster returns with an admitted (or refused) object.
	ActionWarn = "warn"
	// ActionError is an object the check cannot judge: a kind the cluster does not serve, or an old
	// object that could not have been stored.
	ActionError = "error"
	// ActionDryRun is a violation of a DryRun policy, which the cluster only records.
	ActionDryRun = "dryrun"
)

// What found a Problem (Problem.By), besides the name of a webhook.
const (
	// ByKind is the kind lookup: the apiVersion and kind are not served.
	ByKind = "kind"
	// ByAPIServer is the apiserver itself: decoding, the CRD's OpenAPI schema and CEL rules.
	ByAPIServer = "apiserver"
	// ByWebhook stands for the webhook that refused, when its name is not known.
	ByWebhook = "webhook"
)

// Problem is one line of a verdict.
type Problem struct {
	// Action is ActionDeny, ActionWarn or ActionError.
	Action string `json:"action"`
	// By is what found the problem: ByKind, ByAPIServer, or the name of the webhook
	// (nodepool.validation.joiner.dev), whose lines include the ProvisioningPolicies' "[policy] ...".
	By string `json:"by"`
	// Field is the path of the offending field, when the problem names one.
	Field string `json:"field,omitempty"`
	// Policy is the ProvisioningPolicy that gave the line ("[policy] ..."), when one did.
	Policy string `json:"policy,omitempty"`
	// Message is the line as the cluster words it.
	Message string `json:"message"`
}

// Result is the verdict on one object.
type Result struct {
	Source     string           `json:"source"`
	APIVersion string           `json:"apiVersion,omitempty"`
	Kind       string           `json:"kind,omitempty"`
	Name       string           `json:"name,omitempty"`
	Namespace  string           `json:"namespace,omitempty"`
	Operation  policy.Operation `json:"operation"`
	// Allowed reports whether the cluster would accept the object.
	Allowed bool `json:"allowed"`
	// File and Line locate the object's document: its file and the 1-based line the document starts on.
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	// Skipped is set for objects that are not judged: Namespaces (read for the Pods' sake) and, unless
	// Options.StrictKinds, kinds Joiner does not judge. SkipReason says why.
	Skipped    bool   `json:"skipped,omitempty"`
	SkipReason string `json:"skipReason,omitempty"`
	// Error is what the apiserver answers when it refuses the object, word for word (kubectl prints it
	// after "Error from server (...)").
	Error string `json:"error,omitempty"`
	// Problems are the lines of Error, one per problem, then the warnings.
	Problems []Problem `json:"problems,omitempty"`
	// Object is the object as the cluster would store it (with every default), when Allowed.
	Object map[string]any `json:"-"`
}

// reject records a refusal with its apiserver message and its problems.
func (r *Result) reject(message string, problems ...Problem) {
	r.Allowed = false
	r.Error = message
	r.Problems = append(problems, r.Problems...)
}

// rejectStatus records a refusal by the apiserver (a *apierrors.StatusError): the problems are the
// causes of an Invalid error, or the lines of a webhook's denial, or the message itself.
func (r *Result) rejectStatus(err error, by string) {
	if err == nil {
		return
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok {
		r.reject(err.Error(), Problem{Action: ActionDeny, By: by, Message: err.Error()})
		return
	}
	st := status.Status()
	var problems []Problem
	switch {
	case apierrors.IsInvalid(err) && st.Details != nil && len(st.Details.Causes) > 0:
		seen := map[string]bool{}
		for _, c := range st.Details.Causes {
			// A cause's message is the field error's body; the line is the field error as the apiserver
			// prints it, "<nil>: ..." for the error about the whole object.
			msg := c.Field + ": " + c.Message
			fieldPath := c.Field
			if fieldPath == noField {
				fieldPath = ""
			}
			if !seen[msg] {
				seen[msg] = true
				problems = append(problems, Problem{Action: ActionDeny, By: by, Field: fieldPath, Message: msg})
			}
		}
	case by == ByWebhook:
		name, lines := webhookDenial(st.Message)
		for _, l := range lines {
			problems = append(problems, Problem{Action: ActionDeny, By: name, Field: fieldOf(l), Message: l})
		}
	default:
		problems = []Problem{{Action: ActionDeny, By: by, Message: st.Message}}
	}
	r.reject(st.Message, problems...)
}

// noField is how a field error about no particular field prints its path.
const noField = "<nil>"

// webhookDenialPrefix matches the apiserver's wording of a webhook's denial.
var webhookDenialPrefix = regexp.MustCompile(`^admission webhook "([^"]+)" denied the request(: | without explanation$)`)

// webhookDenial splits the apiserver's message for a webhook's denial into the webhook's name and the
// lines the webhook gave.
func webhookDenial(message string) (string, []string) {
	m := webhookDenialPrefix.FindStringSubmatchIndex(message)
	if m == nil {
		return ByWebhook, []string{message}
	}
	name := message[m[2]:m[3]]
	rest := message[m[1]:]
	if rest == "" {
		return name, []string{message}
	}
	return name, strings.Split(rest, "\n")
}

// fieldPattern matches the field path at the start of a line ("spec.limits.cpu: ...",
// "spec.template.metadata.labels[kubernetes.io/arch]: ...") and the suffix of a policy's line ("(field:
// spec.limits.cpu)").
var (
	leadingField = regexp.MustCompile(`^(?:pre-existing: )?([a-z][A-Za-z0-9]*(?:\[[^\]\s]*\])*(?:\.[A-Za-z0-9_-]+(?:\[[^\]\s]*\])*)*): `)
	policyField  = regexp.MustCompile(`^\[[^\]]+\] .* \(field: ([^)]+)\)$`)
	policyName   = regexp.MustCompile(`^(?:pre-existing: )?\[([^\]\s]+)\] `)
)

// fieldOf returns the field a webhook's line names, or "".
func fieldOf(line string) string {
	if m := policyField.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	if m := leadingField.FindStringSubmatch(line); m != nil {
		return m[1]
	}
	return ""
}

// webhooksAnswered records what the webhooks called answered, their warnings and the refusal of the one
// that denied, if any, and reports whether they admitted the object.
func (r *Result) webhooksAnswered(warnings []webhookWarning, denied *apierrors.StatusError) bool {
	r.addWarnings(warnings)
	if denied != nil {
		r.rejectStatus(denied, ByWebhook)
		return false
	}
	return true
}

// addWarnings records the webhooks' warnings.
func (r *Result) addWarnings(ws []webhookWarning) {
	for _, w := range ws {
		r.Problems = append(r.Problems, Problem{Action: ActionWarn, By: w.hook, Field: fieldOf(w.text), Message: w.text})
	}
}

// Summary counts the results of a check.
type Summary struct {
	Objects  int `json:"objects"`
	Policies int `json:"policies"`
	Allowed  int `json:"allowed"`
	Denied   int `json:"denied"`
	Skipped  int `json:"skipped"`
	Warnings int `json:"warnings"`
}

// Report is the result of Check: one Result per item, in order.
type Report struct {
	Objects []Result `json:"objects"`
	Summary Summary  `json:"summary"`
}

func newReport(results []Result, policies int) *Report {
	r := &Report{Objects: results, Summary: Summary{Objects: len(results), Policies: policies}}
	for _, o := range results {
		switch {
		case o.Skipped:
			r.Summary.Skipped++
		case o.Allowed:
			r.Summary.Allowed++
		default:
			r.Summary.Denied++
		}
		for i, p := range o.Problems {
			if p.Action == ActionWarn {
				r.Summary.Warnings++
			}
			if m := policyName.FindStringSubmatch(p.Message); m != nil && p.Policy == "" && p.By != ByAPIServer && p.By != ByKind {
				o.Problems[i].Policy = m[1]
			}
		}
	}
	return r
}

// ExitCode is 1 when the cluster would refuse any object (or the check could not judge one), else 0.
// Warnings do not fail the check.
func (r *Report) ExitCode() int {
	if r.Summary.Denied > 0 {
		return 1
	}
	return 0
}

// Findings are the lines of the text report, one per problem of each object: errors, then denials,
// then warnings, each in the order the cluster gives them. A line reads
//
//	<source> <Kind>/<name>: deny spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1
//	<source> <Kind>/<name>: deny [cpu-cap] NodePool has no CPU limit; set spec.limits.cpu (field: spec.limits.cpu)
//	<source> <Kind>/<name>: warn [team-label] NodePool has no joiner.dev/team label; add one (field: metadata.labels)
//
// where everything after the action is a line of what the cluster answers.
func (r *Report) Findings() []offline.Finding {
	var out []offline.Finding
	for _, o := range r.Objects {
		problems := slices.Clone(o.Problems)
		slices.SortStableFunc(problems, func(a, b Problem) int { return rank(a.Action) - rank(b.Action) })
		for _, p := range problems {
			out = append(out, offline.Finding{Source: o.Source, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Action: p.Action, Message: p.Message})
		}
	}
	return out
}

// SummaryLine counts the objects, the policies and the verdicts.
func (r *Report) SummaryLine() string {
	s := r.Summary
	return fmt.Sprintf("checked %d objects against %d policies: %d allowed, %d denied, %d skipped, %d warnings", s.Objects, s.Policies, s.Allowed, s.Denied, s.Skipped, s.Warnings)
}

func rank(action string) int {
	switch action {
	case ActionError:
		return 0
	case ActionDeny:
		return 1
	case ActionWarn:
		return 2
	}
	return 3
}
