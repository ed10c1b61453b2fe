package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/joiner-dev/joiner/policy"
)

// CheckOptions tune Check.
type CheckOptions struct {
	// Operation is the admission operation objects are reviewed as. Empty means CREATE, so an object is
	// judged as it would be when first applied; UPDATE reviews each object against itself as oldObject.
	Operation policy.Operation
}

// ObjectResult is the outcome of checking one object.
type ObjectResult struct {
	Source     string             `json:"source"`
	APIVersion string             `json:"apiVersion,omitempty"`
	Kind       string             `json:"kind,omitempty"`
	Name       string             `json:"name,omitempty"`
	Namespace  string             `json:"namespace,omitempty"`
	Violations []policy.Violation `json:"violations,omitempty"`
	// Errors lists what prevented a verdict: an object that cannot be reviewed, or a policy that failed to
	// evaluate ("[policy] policy evaluation failed: ...").
	Errors []string `json:"errors,omitempty"`
}

// Summary counts the results of a check.
type Summary struct {
	Objects  int `json:"objects"`
	Policies int `json:"policies"`
	Deny     int `json:"deny"`
	Warn     int `json:"warn"`
	DryRun   int `json:"dryRun"`
	Errors   int `json:"errors"`
}

// Report is the result of Check: one entry per object, in input order.
type Report struct {
	Objects []ObjectResult `json:"objects"`
	Summary Summary        `json:"summary"`
}

// ExitCode follows gator's contract: 1 when any Deny violation or any error was found, else 0. Warn and
// DryRun violations are printed but do not fail the check.
func (r *Report) ExitCode() int {
	if r.Summary.Deny > 0 || r.Summary.Errors > 0 {
		return 1
	}
	return 0
}

// Check evaluates every object against the engine's policies, with the review builder and the decision
// the admission webhook and the audit use (policy.BuildReview, Engine.Decide). The NodePools and node
// classes among objects (see policy.InventoryKind) first replace the engine's inventory, so cross-object
// policies see the same set of objects an audit of a cluster holding them would.
func Check(ctx context.Context, engine *policy.Engine, objects []Object, opts CheckOptions) (*Report, error) {
	op := opts.Operation
	if op == "" {
		op = policy.OperationCreate
	}
	var inventory []map[string]any
	for _, o := range objects {
		if kind, _ := o.Content["kind"].(string); policy.InventoryKind(kind) {
			inventory = append(inventory, o.Content)
		}
	}
	if err := engine.SetInventory(ctx, inventory); err != nil {
		return nil, fmt.Errorf("check: %w", err)
	}
	rep := &Report{Objects: make([]ObjectResult, 0, len(objects))}
	rep.Summary.Policies = len(engine.PolicyNames())
	for _, o := range objects {
		res := ObjectResult{Source: o.Source}
		res.APIVersion, _ = o.Content["apiVersion"].(string)
		res.Kind, _ = o.Content["kind"].(string)
		var old map[string]any
		if op != policy.OperationCreate {
			old = o.Content
		}
		obj := o.Content
		if op == policy.OperationDelete {
			obj = nil
		}
		review, err := policy.BuildReview(policy.ReviewInput{Operation: op, Object: obj, OldObject: old})
		if err == nil {
			res.Name, res.Namespace = review.Name, review.Namespace
			var verdict policy.Verdict
			verdict, err = engine.Decide(ctx, review)
			rep.Summary.Deny += len(verdict.Deny)
			rep.Summary.Warn += len(verdict.Warn)
			rep.Summary.DryRun += len(verdict.DryRun)
			res.Errors = append(res.Errors, policy.Messages(verdict.Errors)...)
			for _, v := range verdict.All() {
				if !v.IsError() {
					res.Violations = append(res.Violations, v)
				}
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("check %s: %w", o.Source, err)
			}
			res.Errors = append(res.Errors, err.Error())
		}
		rep.Summary.Errors += len(res.Errors)
		rep.Objects = append(rep.Objects, res)
	}
	rep.Summary.Objects = len(rep.Objects)
	return rep, nil
}

// Findings are the lines of the text report: each object's violations, then its errors.
func (r *Report) Findings() []Finding {
	var out []Finding
	for _, o := range r.Objects {
		line := Finding{Source: o.Source, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name}
		for _, v := range o.Violations {
			line.Action, line.Message = strings.ToLower(string(v.Action)), v.String()
			out = append(out, line)
		}
		for _, e := range o.Errors {
			line.Action, line.Message = "error", e
			out = append(out, line)
		}
	}
	return out
}

// SummaryLine counts the objects, the policies and the results.
func (r *Report) SummaryLine() string {
	s := r.Summary
	return fmt.Sprintf("checked %d objects against %d policies: %d deny, %d warn, %d dryrun, %d errors", s.Objects, s.Policies, s.Deny, s.Warn, s.DryRun, s.Errors)
}

// WriteText prints one line per violation and per error, then a summary line:
//
//	<source> <Kind>/<name>: deny [policy-name] message (field: spec.limits.cpu)
//
// Everything from "[" on is exactly the message the admission webhook returns.
func (r *Report) WriteText(w io.Writer) error { return WriteText(w, r) }

// WriteJSON prints the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error { return WriteJSON(w, r) }

// CheckConfig is everything `joiner policy check` needs.
type CheckConfig struct {
	// PolicyDir holds ProvisioningPolicy manifests (a file or a directory, walked recursively).
	PolicyDir string
	// ObjectPaths are files, directories or "-" for Stdin.
	ObjectPaths []string
	// Stdin is read for the path "-".
	Stdin io.Reader
	// Output is OutputText (default) or OutputJSON.
	Output string
	// Operation is passed to CheckOptions.
	Operation policy.Operation
	// EvalTimeout bounds the evaluation of one object; zero means policy.DefaultEvalTimeout.
	EvalTimeout time.Duration
	// Logger receives engine logs; the zero value discards them.
	Logger logr.Logger
	// Load tunes how policies and objects are read: the size limit, where warnings about skipped folder
	// entries go, and whether finding no objects is allowed.
	Load LoadOptions
}

// RunCheck loads policies and objects, checks them and writes the report to w. It returns the process exit
// code: 0 when clean or only Warn/DryRun violations were found, 1 on any Deny violation or error. A non-nil
// error (bad flags, unreadable files, invalid policies, no objects found unless cfg.Load.AllowEmpty, ctx done
// while reading) always comes with exit code 1 and no report.
func RunCheck(ctx context.Context, cfg CheckConfig, w io.Writer) (int, error) {
	if err := CheckOutput(cfg.Output); err != nil {
		return 1, err
	}
	if len(cfg.ObjectPaths) == 0 {
		return 1, errors.New("no objects to check; pass files, directories or - for standard input")
	}
	loaded, err := LoadPoliciesWithOptions(ctx, cfg.PolicyDir, cfg.Load)
	if err != nil {
		return 1, err
	}
	objects, err := LoadObjectsWithOptions(ctx, cfg.ObjectPaths, cfg.Stdin, cfg.Load)
	if err != nil {
		return 1, err
	}
	engine := policy.New(policy.Options{Logger: cfg.Logger, EvalTimeout: cfg.EvalTimeout})
	if err := engine.SetPolicies(ctx, Policies(loaded)); err != nil {
		return 1, fmt.Errorf("compile policies: %w", err)
	}
	rep, err := Check(ctx, engine, objects, CheckOptions{Operation: cfg.Operation})
	if err != nil {
		return 1, err
	}
	return WriteReport(w, cfg.Output, rep)
}
