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

// Output formats accepted by Config.Output: those of every check report (offline.WriteReport).
const (
	OutputText = offline.OutputText
	OutputJSON = offline.OutputJSON
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
	// Output is OutputText (default) or OutputJSON.
	Output string
	// FieldValidation is Strict (default), Warn or Ignore, as kubectl's --validate.
	FieldValidation string
	// SkipUnknownKinds skips kinds Joiner does not admit instead of failing on them.
	SkipUnknownKinds bool
	// EvalTimeout bounds the policy evaluation of one object; zero means policy.DefaultEvalTimeout.
	EvalTimeout time.Duration
	// Logger receives the webhooks' and the engine's logs; the zero value discards them.
	Logger logr.Logger
	// Load tunes how files are read (size limit, warnings about skipped folder entries, whether finding
	// no objects is allowed).
	Load offline.LoadOptions
}

// Run loads the manifests, the old manifests and the policies, checks the manifests and writes the
// report to w. It returns the exit code: 1 when the cluster would refuse any object, else 0. A non-nil
// error (bad flags, unreadable files, invalid policies, no objects unless cfg.Load.AllowEmpty, ctx done)
// comes with exit code 1 and no report.
func Run(ctx context.Context, cfg Config, w io.Writer) (int, error) {
	if err := offline.CheckOutput(cfg.Output); err != nil {
		return 1, err
	}
	fv, err := crdvalidation.ParseFieldValidation(cfg.FieldValidation)
	if err != nil {
		return 1, err
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
	checker, err := New(ctx, Options{Policies: policies, EvalTimeout: cfg.EvalTimeout, FieldValidation: fv, SkipUnknownKinds: cfg.SkipUnknownKinds, Logger: cfg.Logger})
	if err != nil {
		return 1, err
	}
	rep, err := checker.Check(ctx, Pair(objects, old))
	if err != nil {
		return 1, err
	}
	return offline.WriteReport(w, cfg.Output, rep)
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
		items[i] = Item{Source: o.Source, Object: o.Content, Old: byKey[identity(o.Content)]}
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
