package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/joiner-dev/joiner/convert"
	"github.com/joiner-dev/joiner/fileinput"
)

const convertUsage = `Usage: joiner convert -f <file|dir|-> [-f ...] [-o DIR] [--role ROLE] [--ami-alias-version V] [--ignore-defaults]
                      [--max-file-size 64Mi] [--allow-empty]

Converts Karpenter manifests written for the legacy APIs into the v1 API Joiner serves, following
Karpenter's documented migration:

  karpenter.sh/v1alpha5 Provisioner           -> karpenter.sh/v1 NodePool (an inline provider -> EC2NodeClass)
  karpenter.k8s.aws/v1alpha1 AWSNodeTemplate  -> karpenter.k8s.aws/v1 EC2NodeClass
  karpenter.sh/v1beta1 NodePool and NodeClaim -> karpenter.sh/v1
  karpenter.k8s.aws/v1beta1 EC2NodeClass      -> karpenter.k8s.aws/v1

What the old APIs left to defaults is written out: a Provisioner without ttlSecondsUntilExpired gets
expireAfter: Never; one without ttlSecondsAfterEmpty or consolidation gets consolidationPolicy: WhenEmpty
and consolidateAfter: Never; the requirements the v1alpha5 webhook added (linux, amd64, on-demand, c/m/r
generation > 2) are added; node classes keep the metadata hop limit 2; amiFamily alone becomes an alias
term such as al2@latest. Kubelet settings move from NodePools to their EC2NodeClass, or to a copy of it
per group of NodePools that disagree. In other objects, the annotations karpenter.sh/do-not-evict and
do-not-consolidate become karpenter.sh/do-not-disrupt and the label karpenter.sh/provisioner-name becomes
karpenter.sh/nodepool. Objects already in v1, and objects that need no change, are written back byte for
byte; comments stay with the fields they describe (changed objects are re-indented). Status and
server-set metadata are left out.

Folders are read recursively for *.yaml, *.yml and *.json files. Only regular text files are read, each
within --max-file-size (FIFOs and devices named with -f are refused, and skipped in folders; pipe data in
with -f -); finding no object at all is an error unless --allow-empty. The result goes to standard output
as multi-document YAML, or with -o to DIR, one file per input at the same relative path (standard input
becomes stdin.yaml).

Findings go to standard error, one a line: "error: FILE:LINE: Kind/name field: what to do". Anything
without a v1 equivalent is reported, never dropped silently. Exit status: 0 converted (notes only), 1
something could not be converted or was left out (or the input could not be read, or a signal stopped
the command), 2 bad flags.

Flags:
`

func runConvert(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("joiner convert", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), convertUsage)
		fs.PrintDefaults()
	}
	var in manifestFlags
	in.bind(fs)
	outDir := fs.String("o", "", "write the converted files to this folder instead of standard output")
	role := fs.String("role", "", "IAM role for converted EC2NodeClasses that name no instance profile (the alpha API's global aws.defaultInstanceProfile is gone)")
	aliasVersion := fs.String("ami-alias-version", "", "version of the amiSelectorTerms alias written for an amiFamily without AMI selector (default latest)")
	ignoreDefaults := fs.Bool("ignore-defaults", false, "do not add the requirements the v1alpha5 webhook defaulted (linux, amd64, on-demand, c/m/r generation > 2)")
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	paths := in.paths(fs)
	if len(paths) == 0 {
		fmt.Fprintln(stderr, "joiner convert: pass the manifests to convert with -f FILE, -f DIR or -f - (standard input)")
		return 2
	}
	inputs, listings, err := convert.ReadInputs(ctx, paths, fileinput.Options{MaxFileSize: int64(in.maxFileSize), Stdin: stdin, Warnings: stderr})
	if err != nil {
		fmt.Fprintln(stderr, "joiner convert:", err)
		return 1
	}
	res, err := convert.Convert(ctx, inputs, convert.Options{Role: *role, AMIAliasVersion: *aliasVersion, IgnoreDefaults: *ignoreDefaults})
	if err != nil {
		fmt.Fprintln(stderr, "joiner convert:", err)
		return 1
	}
	if res.Empty() && !in.allowEmpty {
		fmt.Fprintln(stderr, "joiner convert:", &fileinput.EmptyError{What: "Kubernetes objects", Listings: listings})
		return 1
	}
	return writeConverted(res, *outDir, stdout, stderr)
}

// writeConverted prints the findings, writes the result to outDir or stdout, and returns the exit code.
func writeConverted(res *convert.Result, outDir string, stdout, stderr io.Writer) int {
	errs := 0
	for _, f := range res.Findings {
		if f.Severity == convert.SeverityError {
			errs++
		}
		fmt.Fprintln(stderr, f)
	}
	if outDir != "" {
		if err := res.WriteDir(outDir); err != nil {
			fmt.Fprintln(stderr, "joiner convert:", err)
			return 1
		}
	} else if _, err := stdout.Write(res.Joined()); err != nil {
		fmt.Fprintln(stderr, "joiner convert: write standard output:", err)
		return 1
	}
	fmt.Fprintf(stderr, "joiner convert: %d objects converted, %d unchanged; %d errors, %d notes\n",
		res.Converted, res.Unchanged, errs, len(res.Findings)-errs)
	if res.Failed() {
		return 1
	}
	return 0
}
