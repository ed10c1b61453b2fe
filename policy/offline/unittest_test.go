package offline_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/policy/offline"
)

func TestRunTests(t *testing.T) {
	tests := []struct {
		name    string
		dir     string
		opts    offline.TestOptions
		failure *offline.TestFailure // expected *TestFailure, or nil
		errWant string               // expected other error, or ""
		out     []string             // substrings of the printed report
	}{
		{name: "passing tests", dir: "testdata/unittest/pass", out: []string{"PASS: 2/2"}},
		{name: "verbose shows print output", dir: "testdata/unittest/pass", opts: offline.TestOptions{Verbose: true},
			out: []string{"test_heavy_denied: PASS", "checking a heavy NodePool"}},
		{name: "filter", dir: "testdata/unittest/pass", opts: offline.TestOptions{Run: "light"}, out: []string{"PASS: 1/1"}},
		{name: "failing and erroring tests", dir: "testdata/unittest/fail",
			failure: &offline.TestFailure{Passed: 1, Failed: 2, Errored: 1},
			out: []string{"test_expects_denial_wrongly: FAIL", "test_builtin_error_undefined: FAIL", "test_builtin_limit: ERROR",
				"eval_builtin_error: numbers.range would build 200000 elements", "ERROR: 1/4"}},
		{name: "filter that matches nothing", dir: "testdata/unittest/pass", opts: offline.TestOptions{Run: "nothing-matches"}, errWant: "no test_ rules ran"},
		{name: "no test files", dir: "testdata/unittest/notests", errWant: "no *_test.rego files under testdata/unittest/notests; add tests with rules named test_*, or pass --allow-empty"},
		{name: "no test files allowed", dir: "testdata/unittest/notests", opts: offline.TestOptions{Load: offline.LoadOptions{AllowEmpty: true}},
			out: []string{"nothing to test in testdata/unittest/notests (--allow-empty)"}},
		{name: "neither policies nor tests", dir: "testdata/unittest/empty",
			errWant: "no policies or *_test.rego files found in folder testdata/unittest/empty (no regular *_test.rego file in it); check the paths given, or pass --allow-empty"},
		{name: "a file, not a folder", dir: "testdata/unittest/pass/policy.yaml", errWant: "read testdata/unittest/pass/policy.yaml: it is not a folder"},
		{name: "test file over the size limit", dir: "testdata/unittest/pass", opts: offline.TestOptions{Load: offline.LoadOptions{MaxFileSize: 10}},
			errWant: "over the limit of 10B on one input file"},
		{name: "two policies in one package", dir: "testdata/unittest/duplicate", errWant: "both use package unittest.weight_cap"},
		{name: "policy the engine would reject", dir: "testdata/unittest/badpolicy", errWant: "builtin http.send is not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := offline.RunTestsWithOptions(context.Background(), tc.dir, &out, tc.opts)
			var tf *offline.TestFailure
			switch {
			case tc.failure != nil:
				if !errors.As(err, &tf) || *tf != *tc.failure {
					t.Fatalf("err = %#v, want %+v", err, tc.failure)
				}
			case tc.errWant != "":
				if err == nil || !strings.Contains(err.Error(), tc.errWant) {
					t.Fatalf("err = %v, want %q", err, tc.errWant)
				}
			case err != nil:
				t.Fatalf("err = %v\n%s", err, out.String())
			}
			for _, w := range tc.out {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
		})
	}
	// RunTests is RunTestsWithOptions with defaults.
	var out bytes.Buffer
	if err := offline.RunTests(context.Background(), "testdata/unittest/pass", &out); err != nil || !strings.Contains(out.String(), "PASS: 2/2") {
		t.Errorf("RunTests = %v\n%s", err, out.String())
	}
}
