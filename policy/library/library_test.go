package library_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/admissioncheck"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/library"
	"github.com/joiner-dev/joiner/policy/offline"
)

// TestLibraryRegoTests runs every policy_test.rego of the library through offline.RunTests and fails on any
// failing or erroring Rego test.
func TestLibraryRegoTests(t *testing.T) {
	var out bytes.Buffer
	err := offline.RunTestsWithOptions(context.Background(), ".", &out, offline.TestOptions{Verbose: true})
	t.Log(out.String())
	if err != nil {
		t.Fatalf("library Rego tests: %v", err)
	}
}

// TestLibraryManifests checks that every folder has a valid policy and tests, and that the embedded copy
// matches the folders.
func TestLibraryManifests(t *testing.T) {
	loaded, err := offline.LoadPolicies(".")
	if err != nil {
		t.Fatal(err)
	}
	dirs, err := fs.Glob(library.Manifests, "*/policy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(loaded) != len(dirs) || len(loaded) < 7 {
		t.Fatalf("loaded %d policies from %d policy.yaml files; want one per folder and at least 7", len(loaded), len(dirs))
	}
	tests, err := fs.Glob(library.Manifests, "*/policy_test.rego")
	if err != nil {
		t.Fatal(err)
	}
	if len(tests) != len(dirs) {
		t.Errorf("%d policy_test.rego for %d policies; every policy needs tests", len(tests), len(dirs))
	}
	for _, lp := range loaded {
		t.Run(lp.Policy.Name, func(t *testing.T) {
			folder := strings.Split(strings.TrimPrefix(lp.Source, "./"), "/")[0]
			if folder != lp.Policy.Name {
				t.Errorf("policy %s lives in folder %s; name the folder after the policy", lp.Policy.Name, folder)
			}
			if lp.Policy.Action() != policy.ActionDeny {
				t.Errorf("action %s; library policies deny by default", lp.Policy.Action())
			}
			if len(lp.Policy.Parameters) == 0 {
				t.Errorf("no parameters; document the policy's knobs as spec.parameters")
			}
			if err := policy.Validate(lp.Policy); err != nil {
				t.Errorf("validate: %v", err)
			}
		})
	}
}

// TestLibraryThroughEngine checks example NodePools with the library through `joiner policy check`
// (admissioncheck's policy-only mode, which reviews and decides as the webhook does), so the Rego tests
// and the engine agree: the good NodePools pass, and each bad NodePool breaks exactly the policy it was
// written for.
func TestLibraryThroughEngine(t *testing.T) {
	tests := []struct {
		file     string
		wantCode int
		want     map[string]string // NodePool name -> the only policy it violates
	}{
		{"testdata/good.yaml", 0, map[string]string{}},
		{"testdata/bad.yaml", 1, map[string]string{
			"unknown-team":          "team-tenancy",
			"staging-on-demand":     "spot-outside-production",
			"any-instance":          "instance-allow-list",
			"huge":                  "cpu-limit",
			"immortal":              "expire-after",
			"untainted-gpu":         "gpu-taint",
			"production-no-budgets": "production-budgets",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			var out bytes.Buffer
			code, err := admissioncheck.Run(context.Background(), admissioncheck.Config{PolicyPath: ".", ObjectPaths: []string{tc.file},
				PolicyOnly: true, Output: admissioncheck.OutputJSON}, &out)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d", code, tc.wantCode)
			}
			var rep admissioncheck.Report
			if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
				t.Fatal(err)
			}
			for _, o := range rep.Objects {
				if o.Skipped {
					t.Errorf("%s: skipped (%s)", o.Name, o.SkipReason)
				}
				policies := map[string]bool{}
				var violations []admissioncheck.Problem
				for _, p := range o.Problems {
					if p.Action == admissioncheck.ActionError {
						t.Errorf("%s: error %s", o.Name, p.Message)
						continue
					}
					policies[p.Policy] = true
					violations = append(violations, p)
				}
				want, bad := tc.want[o.Name]
				switch {
				case !bad && len(policies) > 0:
					t.Errorf("%s: unexpected violations %+v", o.Name, violations)
				case bad && (len(policies) != 1 || !policies[want]):
					t.Errorf("%s: violations %+v, want only %s", o.Name, violations, want)
				}
			}
		})
	}
}
