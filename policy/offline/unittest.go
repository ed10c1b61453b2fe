package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/fileinput"
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
	// Load tunes how the policies and tests are read: the size limit, warnings about skipped folder
	// entries, and AllowEmpty, which lets a folder hold no test (or neither policies nor tests) and
	// succeed with nothing run.
	Load LoadOptions
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
// is nothing to test (unless opts.Load.AllowEmpty) or the Rego does not compile.
func RunTestsWithOptions(ctx context.Context, dir string, w io.Writer, opts TestOptions) error {
	modules, err := loadTestModules(ctx, dir, opts.Load)
	if err != nil {
		return fmt.Errorf("run tests: %w", err)
	}
	if modules == nil {
		fmt.Fprintf(w, "nothing to test in %s (--allow-empty)\n", dir)
		return nil
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

// loadTestModules parses the Rego of the policies in dir and its *_test.rego files, read through the input
// layer. It returns nil modules, and no error, when there is nothing to test (no policy or no test) and
// opts.AllowEmpty.
func loadTestModules(ctx context.Context, dir string, opts LoadOptions) (map[string]*ast.Module, error) {
	if info, err := os.Stat(dir); err == nil && !info.IsDir() {
		return nil, fmt.Errorf("read %s: it is not a folder; pass the folder that holds the policies and their *_test.rego files", dir)
	}
	loaded, err := loadPolicies(ctx, dir, opts)
	if err != nil {
		return nil, err
	}
	modules := make(map[string]*ast.Module)
	packages := make(map[string]string)
	for _, lp := range loaded {
		file := lp.Source + "/spec.rego"
		mod, err := policy.ParseRego(file, lp.Policy.Rego)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", lp.Source, err)
		}
		pkg := mod.Package.Path.String()
		if prev, dup := packages[pkg]; dup {
			return nil, fmt.Errorf("%s and %s both use package %s; give each policy its own package so tests can address it",
				prev, lp.Source, strings.TrimPrefix(pkg, "data."))
		}
		packages[pkg] = lp.Source
		modules[file] = mod
	}
	listings, err := fileinput.ReadAll(ctx, []string{dir}, opts.input(nil, testExts), func(f fileinput.File) error {
		mod, err := policy.ParseRego(f.Path, string(f.Data))
		if err != nil {
			return err
		}
		modules[f.Path] = mod
		return nil
	})
	if err != nil {
		return nil, err
	}
	if tests := listings[0].Read; tests == 0 || len(loaded) == 0 {
		return nil, nothingToTest(dir, len(loaded), tests, listings, opts.AllowEmpty)
	}
	return modules, nil
}

// nothingToTest is the error for a folder with no policies or no tests: nil when allowEmpty.
func nothingToTest(dir string, policies, tests int, listings []fileinput.Listing, allowEmpty bool) error {
	switch {
	case allowEmpty:
		return nil
	case tests == 0 && policies == 0:
		return &fileinput.EmptyError{What: "policies or *_test.rego files", Listings: listings}
	case tests == 0:
		return fmt.Errorf("no *_test.rego files under %s; add tests with rules named test_*, or pass --allow-empty if none is expected", dir)
	}
	return fmt.Errorf("no %s found in %s for its %d *_test.rego files to test; expected YAML manifests with apiVersion: %s and kind: %s",
		PolicyKind, dir, tests, PolicyAPIVersion, PolicyKind)
}
