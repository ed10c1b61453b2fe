package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/offline"
)

const policyUsage = `Usage: joiner policy <check|test> [flags]

  check   -f <file|dir|-> [-f ...] --policies <dir> [-o text|json] [--max-file-size 64Mi] [--allow-empty]
          Evaluates the manifests against the ProvisioningPolicies in --policies with the same engine and
          messages as the admission webhooks. Exits 1 on a Deny violation or any error, 0 when there are
          only Warn or DryRun results. Finding no objects at all is an error unless --allow-empty. Folders
          are read for their regular files only (FIFOs, devices, sockets and broken links are reported and
          skipped); a file named with -f may be a pipe. Export a cluster's policies with
          'kubectl get provisioningpolicies -o yaml > policies.yaml'.
  test    <dir> [--run regex] [-v]
          Runs the Rego test_ rules (*_test.rego) against the policies in <dir> with OPA's tester.
`

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func runPolicy(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, policyUsage)
		return 0
	case "check":
		return runPolicyCheck(ctx, args[1:], stdin, stdout, stderr)
	case "test":
		return runPolicyTest(ctx, args[1:], stdout, stderr)
	default:
		fmt.Fprintf(stderr, "joiner policy: unknown command %q\n\n%s", args[0], policyUsage)
		return 2
	}
}

func runPolicyCheck(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("joiner policy check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var files stringList
	fs.Var(&files, "f", "manifest file, directory or - for standard input (repeatable)")
	policies := fs.String("policies", "", "file or directory of ProvisioningPolicy manifests (required)")
	output := fs.String("o", offline.OutputText, "output format: text or json")
	operation := fs.String("operation", string(policy.OperationCreate), "admission operation to evaluate as: CREATE or UPDATE")
	timeout := fs.Duration("timeout", policy.DefaultEvalTimeout, "evaluation deadline per object")
	maxFileSize := byteSize(offline.DefaultMaxFileSize)
	fs.Var(&maxFileSize, "max-file-size", "size limit of each input file and of standard input, such as 64Mi, 512Ki or 1Gi")
	allowEmpty := fs.Bool("allow-empty", false, "succeed when the inputs hold no objects at all (by default that is an error, so a wrong path fails)")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	files = append(files, fs.Args()...)
	if *policies == "" {
		fmt.Fprintln(stderr, "joiner policy check: --policies is required: pass a file or folder of ProvisioningPolicy manifests")
		return 1
	}
	code, err := offline.RunCheck(ctx, offline.CheckConfig{
		PolicyDir: *policies, ObjectPaths: files, Stdin: stdin, Output: *output,
		Operation: policy.Operation(strings.ToUpper(*operation)), EvalTimeout: *timeout,
		Load: offline.LoadOptions{MaxFileSize: int64(maxFileSize), Warnings: stderr, AllowEmpty: *allowEmpty},
	}, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "joiner policy check:", err)
	}
	return code
}

// byteSize is a size flag: a byte count with an optional binary unit (offline.ParseSize).
type byteSize int64

func (b *byteSize) String() string { return offline.FormatSize(int64(*b)) }

func (b *byteSize) Set(v string) error {
	n, err := offline.ParseSize(v)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func runPolicyTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("joiner policy test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	run := fs.String("run", "", "run only the tests whose package.rule matches this regular expression")
	verbose := fs.Bool("v", false, "print every test and its print() output")
	timeout := fs.Duration("timeout", 5*time.Second, "deadline per test")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "joiner policy test: pass exactly one folder of policies and *_test.rego files")
		return 1
	}
	err := offline.RunTestsWithOptions(ctx, fs.Arg(0), stdout, offline.TestOptions{Verbose: *verbose, Run: *run, Timeout: *timeout})
	if err != nil {
		var tf *offline.TestFailure
		if !errors.As(err, &tf) {
			fmt.Fprintln(stderr, "joiner policy test:", err)
		}
		return 1
	}
	return 0
}

// flagExit maps a flag parse error to an exit code: 0 for --help, 2 otherwise.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
