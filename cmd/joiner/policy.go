package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/joiner-dev/joiner/policy/offline"
)

const policyUsage = `Usage: joiner policy <check|test> [flags]

  check   -f <file|dir|-> [-f ...] --policies <file|dir> [-o human|json|junit|sarif|github|gitlab]
          [--operation CREATE|UPDATE] [--strict-kinds] [--max-file-size 64Mi] [--allow-empty]
          The policy-only mode of 'joiner check' ('joiner check --policy-only'): evaluates the manifests
          against the ProvisioningPolicies in --policies with the same engine and messages as the
          admission webhooks, with the same loader and report as 'joiner check'. Legacy Karpenter kinds
          are refused with a pointer to 'joiner convert'; kinds Joiner does not judge are skipped
          (--strict-kinds makes them an error). Exits 0 when allowed (Warn and DryRun results do not
          fail), 1 on a Deny violation or an object that cannot be judged, 2 on a usage or input error.
          Finding no objects at all is an error unless --allow-empty. Only regular text files are read,
          each within --max-file-size. Export a cluster's policies with
          'kubectl get provisioningpolicies -o yaml > policies.yaml'. 'joiner check --help' lists every flag.
  test    <dir> [--run regex] [-v] [--max-file-size 64Mi] [--allow-empty]
          Runs the Rego test_ rules (*_test.rego) against the policies in <dir> with OPA's tester. A folder
          without policies or tests is an error unless --allow-empty.
`

// policyCheckUsage is the usage of `joiner policy check`, the policy-only alias of `joiner check`.
const policyCheckUsage = `Usage: joiner policy check -f <file|dir|-> [-f ...] --policies <file|dir> [flags]

The policy-only mode of 'joiner check' (the same as 'joiner check --policy-only'). Exit codes: 0 allowed
(warnings allowed), 1 denied, 2 usage or input error.

Flags:
`

func runPolicy(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runSubcommand("joiner policy", policyUsage, args, stdout, stderr, map[string]func([]string) int{
		"check": func(args []string) int {
			return runCheckAs(ctx, "joiner policy check", policyCheckUsage, true, args, stdin, stdout, stderr)
		},
		"test": func(args []string) int { return runPolicyTest(ctx, args, stdout, stderr) },
	})
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
