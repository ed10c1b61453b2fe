package library_test

import (
	"bytes"
	"context"
	"io/fs"
	"strings"
	"testing"

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
