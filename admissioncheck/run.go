package admissioncheck

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-logr/logr"

	"github.com/joiner-dev/joiner/crdvalidation"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/offline"
)

// Config is everything `joiner check` needs.
type Config struct {
	// ObjectPaths are files, directories or "-" for Stdin: the manifests to check.
	ObjectPaths []string
	// OldPaths are files or directories of the manifests the cluster holds now (the last applied
	// revision). An object with the same group, kind, namespace and name there is checked as an update
	// of it; the others as creates. Empty means every object is a create.
	OldPaths []string
	// PolicyPath holds the cluster's ProvisioningPolicy manifests (a file or a folder). Empty means no
	// policies.
	PolicyPath string
	// Stdin is read for the path "-".
	Stdin io.Reader
	// Output is a report format: OutputText (default), OutputJSON, OutputJUnit, OutputSARIF,
	// OutputGitHub or OutputGitLab.
	Output string
	// FieldValidation is Strict (default), Warn or Ignore, as kubectl's --validate.
	FieldValidation string
	// StrictKinds makes kinds Joiner does not judge an error instead of skipping them.
	StrictKinds bool
	// PolicyOnly judges the objects by the policies alone (Options.PolicyOnly): `joiner policy check`.
	PolicyOnly bool
	// Operation is the admission operation of the objects that --old does not pair: CREATE (default) or
	// UPDATE, which reviews each of them as an update of itself.
	Operation policy.Operation
	// EvalTimeout bounds the policy evaluation of one object; zero means policy.DefaultEvalTimeout.
	EvalTimeout time.Duration
	// Logger receives the webhooks' and the engine's logs; the zero value discards them.
	Logger logr.Logger
	// Load tunes how files are read (size limit, warnings about skipped folder entries, whether finding
	// no objects is allowed).
	Load offline.LoadOptions
}

// Run loads the manifests, the old manifests and the policies, checks the manifests and writes the
// report to w. It returns the exit code: ExitDenied when the cluster would refuse any object, else
// ExitAllowed. A non-nil error (bad configuration, unreadable files, invalid policies, no objects unless
// cfg.Load.AllowEmpty, ctx done) comes with ExitUsage and no report.
func Run(ctx context.Context, cfg Config, w io.Writer) (int, error) {
	code, err := run(ctx, cfg, w)
	if err != nil {
		return ExitUsage, err
	}
	return code, nil
}

func run(ctx context.Context, cfg Config, w io.Writer) (int, error) {
	if err := CheckOutput(cfg.Output); err != nil {
		return 1, err
	}
	fv, err := crdvalidation.ParseFieldValidation(cfg.FieldValidation)
	if err != nil {
		return 1, err
	}
	switch cfg.Operation {
	case "", policy.OperationCreate, policy.OperationUpdate:
	default:
		return 1, fmt.Errorf("operation %q is not supported; use %s or %s", cfg.Operation, policy.OperationCreate, policy.OperationUpdate)
	}
	if len(cfg.ObjectPaths) == 0 {
		return 1, errors.New("no manifests to check; pass files, directories or - for standard input with -f")
	}
	var policies []policy.Policy
	if cfg.PolicyPath != "" {
		loaded, err := offline.LoadPoliciesWithOptions(ctx, cfg.PolicyPath, cfg.Load)
		if err != nil {
			return 1, err
		}
		policies = offline.Policies(loaded)
	}
	objects, err := offline.LoadObjectsWithOptions(ctx, cfg.ObjectPaths, cfg.Stdin, cfg.Load)
	if err != nil {
		return 1, err
	}
	var old []offline.Object
	if len(cfg.OldPaths) > 0 {
		oldLoad := cfg.Load
		oldLoad.AllowEmpty = true
		if old, err = offline.LoadObjectsWithOptions(ctx, cfg.OldPaths, nil, oldLoad); err != nil {
			return 1, fmt.Errorf("old manifests: %w", err)
		}
	}
	checker, err := New(ctx, Options{Policies: policies, EvalTimeout: cfg.EvalTimeout, FieldValidation: fv,
		StrictKinds: cfg.StrictKinds, PolicyOnly: cfg.PolicyOnly, Logger: cfg.Logger})
	if err != nil {
		return 1, err
	}
	items := Pair(objects, old)
	if cfg.Operation == policy.OperationUpdate {
		for i := range items {
			if items[i].Old == nil {
				items[i].Old = items[i].Object
			}
		}
	}
	rep, err := checker.Check(ctx, items)
	if err != nil {
		return 1, err
	}
	return WriteReport(w, cfg.Output, rep)
}

// Item is one object to check.
type Item struct {
	// Source says where the object comes from, such as "nodepools.yaml#2"; it prefixes the report lines.
	Source string
	// Object is the manifest, in its unstructured JSON form. Check does not modify it.
	Object map[string]any
	// Old is the object the cluster stores now, as last applied, when Object updates it; nil for a
	// create. It is stored as a create would have stored it (decoded, defaulted) and is not judged.
	Old map[string]any
	// File and Line locate the object's document (its file and the 1-based line it starts on) for the
	// reports that point into files; empty and 0 when unknown.
	File string
	Line int
}

// Pair turns loaded manifests into Items, each with the old manifest of the same object (same API
// group, kind, namespace and name) when old has one.
func Pair(objects, old []offline.Object) []Item {
	byKey := make(map[string]map[string]any, len(old))
	for _, o := range old {
		byKey[identity(o.Content)] = o.Content
	}
	items := make([]Item, len(objects))
	for i, o := range objects {
		items[i] = Item{Source: o.Source, Object: o.Content, Old: byKey[identity(o.Content)], File: o.File, Line: o.Line}
	}
	return items
}

// identity is an object's API group, kind, namespace and name.
func identity(obj map[string]any) string {
	apiVersion, _ := obj["apiVersion"].(string)
	group, _, _ := strings.Cut(apiVersion, "/")
	if !strings.Contains(apiVersion, "/") {
		group = ""
	}
	kind, _ := obj["kind"].(string)
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	namespace, _ := meta["namespace"].(string)
	return strings.Join([]string{group, kind, namespace, name}, "\x00")
}
