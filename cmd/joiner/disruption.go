package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/controllers/disruption"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/providers/local"
)

const disruptionUsage = `Usage: joiner disruption plan [flags]

  plan    --kubeconfig <file> [--passes N] [-o text|json] [--max-file-size 64Mi] [consolidation flags]
          Reads the cluster and prints what the next disruption passes would do (each pass applied
          in memory before the next), and, for every node the next pass leaves alone, why: budget,
          do-not-disrupt, PodDisruptionBudget, not consolidatable yet, no cheaper option, ...
          It changes nothing. The decisions come from the same engine as the controller's, with
          the consolidation flags given here (use the controller's values). The kubeconfig must be a
          regular, non-empty text file within --max-file-size.
`

func runDisruption(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return runSubcommand("joiner disruption", disruptionUsage, args, stdout, stderr, map[string]func([]string) int{
		"plan": func(args []string) int { return runDisruptionPlan(ctx, args, stdout, stderr) },
	})
}

func runDisruptionPlan(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("joiner disruption plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster (default: $KUBECONFIG, then ~/.kube/config)")
	passes := fs.Int("passes", 10, "most passes to show")
	output := fs.String("o", disruption.OutputText, "output format: text or json")
	cloudProvider := fs.String("cloud-provider", local.Name, "cloud provider whose instance types and prices to use: local")
	timeout := fs.Duration("timeout", 2*time.Minute, "time limit of the whole dry run")
	var in inputFlags
	in.bindMaxFileSize(fs)
	var opts disruption.Options
	opts.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, disruptionUsage, "\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "joiner disruption plan: unexpected arguments %v\n", fs.Args())
		return 2
	}
	if *passes < 1 {
		fmt.Fprintln(stderr, "joiner disruption plan: --passes must be at least 1")
		return 2
	}
	if *output != disruption.OutputText && *output != disruption.OutputJSON {
		fmt.Fprintf(stderr, "joiner disruption plan: -o %q is not supported; use text or json\n", *output)
		return 2
	}
	if *cloudProvider != local.Name {
		fmt.Fprintf(stderr, "joiner disruption plan: --cloud-provider %q is not available in this build; use %s\n", *cloudProvider, local.Name)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cfg, err := restConfig(ctx, *kubeconfig, int64(in.maxFileSize))
	if err != nil {
		fmt.Fprintln(stderr, "joiner disruption plan:", err)
		return 1
	}
	scheme, err := apischeme.New()
	if err != nil {
		fmt.Fprintln(stderr, "joiner disruption plan:", err)
		return 1
	}
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(stderr, "joiner disruption plan:", err)
		return 1
	}
	cloud, err := local.New(ctx, kube, local.Options{})
	if err != nil {
		fmt.Fprintln(stderr, "joiner disruption plan:", err)
		return 1
	}
	state, pdbs, err := disruption.ReadState(ctx, kube)
	if err != nil {
		fmt.Fprintln(stderr, "joiner disruption plan:", err)
		return 1
	}
	cluster, err := disruption.NewCluster(ctx, cloud, state, pdbs, opts.Scheduling, time.Now(), logr.Discard())
	if err != nil {
		fmt.Fprintln(stderr, "joiner disruption plan:", err)
		return 1
	}
	plans, err := planner.New(opts.Planner, time.Now).DryRun(ctx, cluster, *passes)
	if err != nil {
		fmt.Fprintln(stderr, "joiner disruption plan:", err)
		return 1
	}
	if err := disruption.WritePlans(stdout, plans, *output); err != nil {
		fmt.Fprintln(stderr, "joiner disruption plan:", err)
		return 1
	}
	return 0
}
