package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/admissioncheck"
	"github.com/joiner-dev/joiner/crdvalidation"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/policy"
)

const checkUsage = `Usage: joiner check -f <file|dir|-> [-f ...] [--policies <file|dir>] [--old <file|dir>] [--policy-only]
                    [-o human|json|junit|sarif|github|gitlab] [--validate strict|warn|ignore] [--strict-kinds]
                    [--operation CREATE|UPDATE] [--max-file-size 64Mi] [--allow-empty]

Gives each manifest the verdict a cluster running Joiner would give it at kubectl apply, without a
cluster, with the same messages:

  1. the apiVersion and kind must be served: legacy Karpenter kinds (karpenter.sh/v1alpha5, v1beta1,
     karpenter.k8s.aws/v1alpha1, v1beta1) are refused with a pointer to 'joiner convert';
  2. the CRD's OpenAPI schema and CEL rules, run by the apiserver's own validation code against the
     CRDs this joiner was built with, after pruning unknown fields and applying the schema's defaults;
  3. the defaulting webhook's defaults;
  4. the validating webhook's semantic checks (cron schedules, contradicting requirements, the local
     provider's instance-type catalog, runtime validation, node class zones, Pod tenancy);
  5. the ProvisioningPolicies in --policies, as the validating webhooks evaluate them.

With --policy-only (what 'joiner policy check' runs) only steps 1 and 5 apply: the policies alone judge
the objects, with the same loader, report and refusal of legacy kinds.

Kinds Joiner does not judge (Deployments, ConfigMaps, ...) are reported as skipped; --strict-kinds makes
them an error. Namespaces are read for the Pods' sake and skipped.

The manifests checked together make up the cluster the webhooks see: their node classes, NodePools and
Namespaces answer the webhooks' lookups and fill the policies' data.inventory. With --old (the manifests
the cluster holds now, such as the last applied revision) an object found there too is checked as an
update of it, so the CRD's update rules (immutable fields) apply.

Output (-o, --output): human (default) prints one line per problem, '<source> <Kind>/<name>: deny|warn|error
<what the cluster says>', then a summary; json each object's verdict, problems (with field paths) and the
apiserver's whole message; junit JUnit XML (one testsuite per file, one testcase per object); sarif a
SARIF 2.1.0 log (one result per denial or warning, at the line of the object's document); github GitHub
Actions annotations (::error file=F,line=L::message); gitlab a GitLab Code Quality report. Messages and
warnings are never cut.

Exit codes:
  0  every object is allowed (warnings do not fail the check; skipped kinds do not either)
  1  the cluster would refuse an object (or, with --strict-kinds, a kind Joiner does not judge was found)
  2  usage or input error: bad flags, unreadable or invalid files, invalid policies, no objects

Flags:
`

// checkFlags are the flags of `joiner check` and of its alias `joiner policy check`.
type checkFlags struct {
	inputs      manifestFlags
	old         stringList
	policies    *string
	output      string
	validate    *string
	strictKinds *bool
	skipUnknown *bool
	policyOnly  *bool
	operation   *string
	timeout     *time.Duration
}

// bind defines the flags on fs.
func (c *checkFlags) bind(fs *flag.FlagSet) {
	c.inputs.bind(fs)
	fs.Var(&c.old, "old", "file or directory of the manifests the cluster holds now; matching objects are checked as updates (repeatable)")
	c.policies = fs.String("policies", "", "file or directory of the cluster's ProvisioningPolicy manifests (default: no policies)")
	help := "report format: human, json, junit, sarif, github or gitlab (text is human)"
	fs.StringVar(&c.output, "o", admissioncheck.OutputHuman, help)
	fs.StringVar(&c.output, "output", admissioncheck.OutputHuman, help)
	c.validate = fs.String("validate", "strict", "what to do with fields the CRD does not declare, as kubectl apply --validate: strict (refuse), warn (drop with a warning) or ignore")
	c.strictKinds = fs.Bool("strict-kinds", false, "make manifests of kinds Joiner does not judge (Deployments, ConfigMaps, ...) an error (exit 1) instead of skipping them")
	c.skipUnknown = fs.Bool("skip-unknown-kinds", false, "deprecated, no effect: kinds Joiner does not judge are skipped unless --strict-kinds")
	c.policyOnly = fs.Bool("policy-only", false, "judge the manifests by the --policies alone, as 'joiner policy check'")
	c.operation = fs.String("operation", string(policy.OperationCreate), "admission operation of the objects --old does not pair: CREATE, or UPDATE (each object as an update of itself)")
	c.timeout = fs.Duration("timeout", policy.DefaultEvalTimeout, "policy evaluation deadline per object")
}

// config turns the parsed flags into the check's configuration; the error is a usage error.
func (c *checkFlags) config(fs *flag.FlagSet, stdin io.Reader, stderr io.Writer) (admissioncheck.Config, error) {
	fv, err := fieldValidation(*c.validate)
	if err != nil {
		return admissioncheck.Config{}, err
	}
	if *c.skipUnknown {
		fmt.Fprintln(stderr, "note: --skip-unknown-kinds is deprecated and has no effect: kinds Joiner does not judge are skipped unless --strict-kinds")
	}
	output := c.output
	if output == admissioncheck.OutputText {
		output = admissioncheck.OutputHuman
	}
	if err := admissioncheck.CheckOutput(output); err != nil {
		return admissioncheck.Config{}, err
	}
	return admissioncheck.Config{
		ObjectPaths: c.inputs.paths(fs), OldPaths: c.old, PolicyPath: *c.policies, Stdin: stdin, Output: output,
		FieldValidation: string(fv), StrictKinds: *c.strictKinds, PolicyOnly: *c.policyOnly,
		Operation: policy.Operation(strings.ToUpper(*c.operation)), EvalTimeout: *c.timeout,
		Load: c.inputs.loadOptions(stderr),
	}, nil
}

func runCheck(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runCheckAs(ctx, "joiner check", checkUsage, false, args, stdin, stdout, stderr)
}

// runCheckAs runs `joiner check` under name (`joiner policy check` is its policy-only alias, which
// requires --policies).
func runCheckAs(ctx context.Context, name, usage string, policyOnly bool, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	var flags checkFlags
	flags.bind(fs)
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	cfg, err := flags.config(fs, stdin, stderr)
	if err == nil && policyOnly {
		cfg.PolicyOnly = true
		if cfg.PolicyPath == "" {
			err = fmt.Errorf("--policies is required: pass a file or folder of ProvisioningPolicy manifests")
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
		return admissioncheck.ExitUsage
	}
	if os.Getenv("GOGC") == "" {
		// Checking allocates heavily (OPA, CEL) on a small live heap: fewer collections, shorter runs.
		debug.SetGCPercent(operator.CheckGoGCPercent)
	}
	code, err := admissioncheck.Run(ctx, cfg, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, err)
	}
	return code
}

// fieldValidation reads kubectl's --validate values (strict, warn, ignore; true and false as kubectl
// still accepts them) as the apiserver's fieldValidation.
func fieldValidation(v string) (crdvalidation.FieldValidation, error) {
	switch strings.ToLower(v) {
	case "strict", "true":
		return crdvalidation.FieldValidationStrict, nil
	case "warn":
		return crdvalidation.FieldValidationWarn, nil
	case "ignore", "false":
		return crdvalidation.FieldValidationIgnore, nil
	}
	return "", fmt.Errorf("--validate %q is not supported; use strict, warn or ignore", v)
}
