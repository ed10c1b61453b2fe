package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/joiner-dev/joiner/admissioncheck"
	"github.com/joiner-dev/joiner/crdvalidation"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/policy"
)

const checkUsage = `Usage: joiner check -f <file|dir|-> [-f ...] [--policies <file|dir>] [--old <file|dir>] [-o text|json]
                    [--validate strict|warn|ignore] [--skip-unknown-kinds] [--max-file-size 64Mi] [--allow-empty]

Gives each manifest the verdict a cluster running Joiner would give it at kubectl apply, without a
cluster, with the same messages:

  1. the apiVersion and kind must be served: legacy Karpenter kinds (karpenter.sh/v1alpha5, v1beta1,
     karpenter.k8s.aws/v1alpha1, v1beta1) are refused with a pointer to 'joiner convert';
  2. the CRD's OpenAPI schema and CEL rules, run by the apiserver's own validation code against the
     CRDs this joiner was built with, after pruning unknown fields and applying the schema's defaults;
  3. the defaulting webhook's defaults;
  4. the validating webhook's semantic checks (cron schedules, contradicting requirements, the local
     provider's instance-type catalog, runtime validation, node class zones, Pod tenancy);
  5. the ProvisioningPolicies in --policies, as 'joiner policy check' evaluates them.

The manifests checked together make up the cluster the webhooks see: their node classes, NodePools and
Namespaces answer the webhooks' lookups and fill the policies' data.inventory. With --old (the manifests
the cluster holds now, such as the last applied revision) an object found there too is checked as an
update of it, so the CRD's update rules (immutable fields) apply.

One line per problem: '<source> <Kind>/<name>: deny|warn|error <what the cluster says>'; with -o json,
each object's verdict, its problems (with their field paths) and the apiserver's whole message. Exits 1
when the cluster would refuse any manifest, 0 otherwise (warnings do not fail). 'joiner policy check'
still runs the policies alone.

Flags:
`

func runCheck(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("joiner check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, checkUsage)
		fs.PrintDefaults()
	}
	var inputs manifestFlags
	inputs.bind(fs)
	var old stringList
	fs.Var(&old, "old", "file or directory of the manifests the cluster holds now; matching objects are checked as updates (repeatable)")
	policies := fs.String("policies", "", "file or directory of the cluster's ProvisioningPolicy manifests (default: no policies)")
	output := fs.String("o", admissioncheck.OutputText, "output format: text or json")
	validate := fs.String("validate", "strict", "what to do with fields the CRD does not declare, as kubectl apply --validate: strict (refuse), warn (drop with a warning) or ignore")
	skipUnknown := fs.Bool("skip-unknown-kinds", false, "skip manifests of kinds Joiner does not admit (Deployments, ConfigMaps, ...) instead of failing on them")
	timeout := fs.Duration("timeout", policy.DefaultEvalTimeout, "policy evaluation deadline per object")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	fv, err := fieldValidation(*validate)
	if err != nil {
		fmt.Fprintln(stderr, "joiner check:", err)
		return 2
	}
	if os.Getenv("GOGC") == "" {
		// Checking allocates heavily (OPA, CEL) on a small live heap: fewer collections, shorter runs.
		debug.SetGCPercent(operator.GoGCPercent)
	}
	code, err := admissioncheck.Run(ctx, admissioncheck.Config{
		ObjectPaths: inputs.paths(fs), OldPaths: old, PolicyPath: *policies, Stdin: stdin, Output: *output,
		FieldValidation: string(fv), SkipUnknownKinds: *skipUnknown, EvalTimeout: *timeout,
		Load: inputs.loadOptions(stderr),
	}, stdout)
	if err != nil {
		fmt.Fprintln(stderr, "joiner check:", err)
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
