package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/policy"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"
)

// TestOptions tune RunTestsWithOptions.
type TestOptions struct {
	// Verbose prints every test, not just failures, with print() output.
	Verbose bool
	// Run keeps only tests whose name (package.rule) matches this regular expression.
	Run string
	// Timeout bounds each test; zero means 5s.
	Timeout time.Duration
}

// TestFailure is the error RunTests returns when tests ran but some failed or errored.
type TestFailure struct {
	Passed, Failed, Errored, Skipped int
}

// Error summarises the counts.
func (f *TestFailure) Error() string {
	return fmt.Sprintf("policy tests failed: %d failed, %d errored, %d passed, %d skipped", f.Failed, f.Errored, f.Passed, f.Skipped)
}

// RunTests runs the Rego unit tests under dir with default options; see RunTestsWithOptions.
func RunTests(ctx context.Context, dir string, w io.Writer) error {
	return RunTestsWithOptions(ctx, dir, w, TestOptions{})
}

// RunTestsWithOptions runs the `test_` rules of every *_test.rego file under dir with OPA's tester, against
// the Rego of every ProvisioningPolicy manifest under dir, and prints the results to w (failures with the
// failing expression and print output). Policies and tests are compiled with the engine's sandbox and strict
// mode; a builtin error makes its expression undefined, as in the engine (and OPA's default mode), while the
// engine's builtin size caps stop the test with an error. Policies must use distinct
// packages so tests can address each one. It returns *TestFailure when tests fail, and an error when there
// is nothing to test or the Rego does not compile.
func RunTestsWithOptions(ctx context.Context, dir string, w io.Writer, opts TestOptions) error {
	loaded, err := LoadPoliciesWithOptions(ctx, dir, LoadOptions{})
	if err != nil {
		return fmt.Errorf("run tests: %w", err)
	}
	modules := make(map[string]*ast.Module)
	packages := make(map[string]string)
	for _, lp := range loaded {
		file := lp.Source + "/spec.rego"
		mod, err := policy.ParseRego(file, lp.Policy.Rego)
		if err != nil {
			return fmt.Errorf("run tests: %s: %w", lp.Source, err)
		}
		pkg := mod.Package.Path.String()
		if prev, dup := packages[pkg]; dup {
			return fmt.Errorf("run tests: %s and %s both use package %s; give each policy its own package so tests can address it",
				prev, lp.Source, strings.TrimPrefix(pkg, "data."))
		}
		packages[pkg] = lp.Source
		modules[file] = mod
	}
	testFiles, err := listInputs(dir, LoadOptions{}, "_test.rego")
	if err != nil {
		return fmt.Errorf("run tests: %w", err)
	}
	for _, f := range testFiles.files {
		src, err := readInput(ctx, f, nil, DefaultMaxFileSize)
		if err != nil {
			return fmt.Errorf("run tests: %w", err)
		}
		mod, err := policy.ParseRego(f.path, string(src))
		if err != nil {
			return fmt.Errorf("run tests: %w", err)
		}
		modules[f.path] = mod
	}
	if len(testFiles.files) == 0 {
		return fmt.Errorf("run tests: no *_test.rego files under %s; add tests with rules named test_*", dir)
	}

	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	compiler := policy.NewCompiler(policy.Capabilities()).WithEnablePrintStatements(true)
	runner := tester.NewRunner().
		SetCompiler(compiler).
		SetStore(inmem.New()).
		SetModules(modules).
		CapturePrintOutput(true).
		RaiseBuiltinErrors(false).
		SetTimeout(timeout)
	if opts.Run != "" {
		runner = runner.Filter(opts.Run)
	}
	results, err := runner.RunTests(ctx, nil)
	if err != nil {
		return fmt.Errorf("run tests: compile: %w", err)
	}

	// Count results while the reporter prints them.
	counts := &TestFailure{}
	forward := make(chan *tester.Result)
	go func() {
		defer close(forward)
		for r := range results {
			switch {
			case r.Skip:
				counts.Skipped++
			case r.Error != nil:
				counts.Errored++
			case r.Fail:
				counts.Failed++
			default:
				counts.Passed++
			}
			forward <- r
		}
	}()
	reporter := tester.PrettyReporter{Output: w, Verbose: opts.Verbose, FailureLine: true, LocalVars: true}
	if err := reporter.Report(forward); err != nil {
		// Drain so the counting goroutine and the runner finish.
		for range forward {
		}
		return fmt.Errorf("run tests: report: %w", err)
	}
	if counts.Failed+counts.Errored > 0 {
		return counts
	}
	if counts.Passed == 0 {
		return errors.New("run tests: no test_ rules ran; name test rules test_* (or check the --run filter)")
	}
	return nil
}
