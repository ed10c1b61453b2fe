// Command joiner is Joiner's one binary: `joiner controller` runs the operator (webhooks,
// certificates, policy, audit and provisioning controllers), and `joiner policy check|test` run the
// same policies offline, in a GitOps pipeline, with the same engine and messages as the webhooks.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `Usage: joiner <command> [flags]

Commands:
  controller     run the operator: admission webhooks, certificates, policy and provisioning controllers
  check          give manifests the cluster's full admission verdict offline: CRD schema and CEL rules,
                 the webhooks' defaults and checks, and ProvisioningPolicies (exit 1 on a refusal)
  policy check   check manifests against ProvisioningPolicies only (exit 1 on a Deny violation)
  policy test    run the Rego unit tests (test_ rules) of a policy folder
  disruption plan
                 print what the next disruption passes would do, and why each other node is left alone
  convert        convert legacy Karpenter manifests (v1alpha5, v1alpha1, v1beta1) to the v1 API
  version        print the version

Run 'joiner <command> --help' for the flags of a command.
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run dispatches a command line and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	printVersion := func([]string) int {
		fmt.Fprintln(stdout, versionLine())
		return 0
	}
	// The commands that read input stop within a second of a signal (untilStopped).
	reading := func(name string, command func(args []string) int) func([]string) int {
		return func(args []string) int { return untilStopped(ctx, stderr, name, func() int { return command(args) }) }
	}
	return runSubcommand("joiner", usage, args, stdout, stderr, map[string]func([]string) int{
		"version":    printVersion,
		"--version":  printVersion,
		"controller": func(args []string) int { return runController(ctx, args, stderr) },
		"check": reading("joiner check", func(args []string) int {
			return runCheck(ctx, args, stdin, stdout, stderr)
		}),
		"policy": reading("joiner policy", func(args []string) int {
			return runPolicy(ctx, args, stdin, stdout, stderr)
		}),
		"disruption": reading("joiner disruption", func(args []string) int {
			return runDisruption(ctx, args, stdout, stderr)
		}),
		"convert": reading("joiner convert", func(args []string) int {
			return runConvert(ctx, args, stdin, stdout, stderr)
		}),
	})
}
