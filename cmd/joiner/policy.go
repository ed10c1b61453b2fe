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
          only Warn or DryRun results. Finding no objects at all is an error unless --allow-empty. Only
          regular text files are read, each within --max-file-size: a FIFO or a device named with -f is
          refused (pipe data in with -f -), and folders are read for their regular files only (FIFOs,
          devices, sockets and broken links are reported and skipped). Export a cluster's policies with
          'kubectl get provisioningpolicies -o yaml > policies.yaml'.
  test    <dir> [--run regex] [-v] [--max-file-size 64Mi] [--allow-empty]
          Runs the Rego test_ rules (*_test.rego) against the policies in <dir> with OPA's tester. A folder
          without policies or tests is an error unless --allow-empty.
`

func runPolicy(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runSubcommand("joiner policy", policyUsage, args, stdout, stderr, map[string]func([]string) int{
		"check": func(args []string) int { return runPolicyCheck(ctx, args, stdin, stdout, stderr) },
		"test":  func(args []string) int { return runPolicyTest(ctx, args, stdout, stderr) },
	})
}

func runPolicyCheck(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("joiner policy check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var inputs manifestFlags
	inputs.bind(fs)
	policies := fs.String("policies", "", "file or directory of ProvisioningPolicy manifests (required)")
	output := fs.String("o", offline.OutputText, "output format: text or json")
	operation := fs.String("operation", string(policy.OperationCreate), "admission operation to evaluate as: CREATE or UPDATE")
	timeout := fs.Duration("timeout", policy.DefaultEvalTimeout, "evaluation deadline per object")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if *policies == "" {
		fmt.Fprintln(stderr, "joiner policy check: --policies is required: pass a file or folder of ProvisioningPolicy manifests")
		return 1
	}
	code, err := offline.RunCheck(ctx, offline.CheckConfig{
		PolicyDir: *policies, ObjectPaths: inputs.paths(fs), Stdin: stdin, Output: *output,
		Operation: policy.Operation(strings.ToUpper(*operation)), EvalTimeout: *timeout,
		Load: inputs.loadOptions(stderr),
	}, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "joiner policy check:", err)
	}
	return code
}

func runPolicyTest(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("joiner policy test", flag.ContinueOnError)
	fs.SetOutput(stderr)
	run := fs.String("run", "", "run only the tests whose package.rule matches this regular expression")
	verbose := fs.Bool("v", false, "print every test and its print() output")
	timeout := fs.Duration("timeout", 5*time.Second, "deadline per test")
	var in inputFlags
	in.bind(fs, "the folder holds no policies or no *_test.rego files")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "joiner policy test: pass exactly one folder of policies and *_test.rego files")
		return 1
	}
	err := offline.RunTestsWithOptions(ctx, fs.Arg(0), stdout, offline.TestOptions{
		Verbose: *verbose, Run: *run, Timeout: *timeout, Load: in.loadOptions(stderr),
	})
	if err != nil {
		var tf *offline.TestFailure
		if !errors.As(err, &tf) {
			fmt.Fprintln(stderr, "joiner policy test:", err)
		}
		return 1
	}
	return 0
}
