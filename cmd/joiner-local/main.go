// Command joiner-local runs Joiner's main job on one machine with no cloud and no Docker: a real
// local control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok, built
// from Go modules) with Joiner's CRDs, webhooks and certificates installed and Joiner running on it.
// `make run` starts it; Ctrl-C stops everything.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/disruption"
	"github.com/joiner-dev/joiner/localrun"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/testbed"
)

type options struct {
	apiServerPort int
	kubeconfigOut string
	crdDir        string
	assets        string
	verbose       bool
	noJoiner      bool
	manifests     string
	demo          bool
	disruption    disruption.Options
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("joiner-local", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: joiner-local [flags]\n\n"+
			"Starts a local Kubernetes control plane (etcd, kube-apiserver, kube-scheduler,\n"+
			"kube-controller-manager and kwok) with Joiner's CRDs, webhooks and certificates installed,\n"+
			"runs Joiner on it with the local provider, applies a default node class and NodePool,\n"+
			"prints how to reach it, and runs until interrupted (Ctrl-C), then stops every process it started.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	fs.IntVar(&o.apiServerPort, "apiserver-port", 0, "port for kube-apiserver on 127.0.0.1 (0 picks a free port)")
	fs.StringVar(&o.kubeconfigOut, "kubeconfig-out", ".cache/run/kubeconfig", "where to write the admin kubeconfig")
	fs.StringVar(&o.crdDir, "crds", "config/crd/bases", "directory of CRDs to install")
	fs.StringVar(&o.assets, "assets", "", "directory of control-plane binaries (default: $JOINER_TESTBED_ASSETS or .cache/testbed/current)")
	fs.BoolVar(&o.verbose, "v", false, "log progress and Joiner's logs")
	fs.BoolVar(&o.noJoiner, "no-joiner", false, "start only the control plane, without Joiner")
	fs.BoolVar(&o.demo, "demo", false, "run the scale-up scenario unattended, print its timeline, and stop")
	fs.StringVar(&o.manifests, "manifests", "config/samples/local", "manifests applied once Joiner is up (a default LocalNodeClass and NodePool)")
	o.disruption.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %v; see --help", fs.Args())
	}
	if o.demo && o.noJoiner {
		return o, fmt.Errorf("--demo needs Joiner; drop --no-joiner")
	}
	if o.apiServerPort < 0 || o.apiServerPort > 65535 {
		return o, fmt.Errorf("--apiserver-port %d is out of range; use 1-65535, or 0 for a free port", o.apiServerPort)
	}
	return o, nil
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "joiner-local:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		if errors.Is(err, context.Canceled) {
			fmt.Fprintln(os.Stderr, "joiner-local: interrupted; everything it had started is stopped")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "joiner-local:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	log := logr.Discard()
	if o.verbose {
		log = funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{})
	}
	if _, err := os.Stat(o.crdDir); err != nil {
		return fmt.Errorf("CRD directory %s: %w (run from the repository root, or pass --crds)", o.crdDir, err)
	}
	fmt.Fprintln(out, "Starting the local control plane (etcd, kube-apiserver, scheduler, controller-manager, kwok)...")
	env, err := testbed.Start(ctx, testbed.Options{
		AssetsDir:         o.assets,
		CRDDirs:           []string{o.crdDir},
		Scheduler:         true,
		ControllerManager: true,
		Kwok:              true,
		APIServerPort:     o.apiServerPort,
		Log:               log,
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "\nStopping the local control plane...")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "joiner-local: stop:", err)
		}
		_ = os.Remove(o.kubeconfigOut)
		fmt.Fprintln(out, "Stopped; no process is left running.")
	}()

	kubeconfig, err := os.ReadFile(env.KubeconfigPath)
	if err != nil {
		return fmt.Errorf("read kubeconfig: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(o.kubeconfigOut), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(o.kubeconfigOut), err)
	}
	if err := os.WriteFile(o.kubeconfigOut, kubeconfig, 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	abs, _ := filepath.Abs(o.kubeconfigOut)
	if o.noJoiner {
		fmt.Fprintf(out, "\nThe local cluster is up (without Joiner). Joiner's CRDs are installed.\n\n  export KUBECONFIG=%s\n  kubectl get crds\n\nPress Ctrl-C to stop everything.\n", abs)
		<-ctx.Done()
		return nil
	}
	fmt.Fprintln(out, "Starting Joiner (webhooks, certificates, policies, controllers, local provider)...")
	joinerLogFile, err := os.Create(filepath.Join(env.LogDir, "joiner.log"))
	if err != nil {
		return fmt.Errorf("create Joiner's log: %w", err)
	}
	defer func() { _ = joinerLogFile.Close() }()
	var joinerOut io.Writer = joinerLogFile
	if o.verbose {
		joinerOut = io.MultiWriter(joinerLogFile, os.Stderr)
	}
	joinerLog := zap.New(zap.WriteTo(joinerOut))
	operator.TuneGoGC()
	run, err := localrun.Start(ctx, env.Config, localrun.Options{Log: joinerLog,
		Operator: operator.Options{Controllers: controllers.Options{Disruption: o.disruption}}})
	if err != nil {
		return fmt.Errorf("start Joiner: %w", err)
	}
	defer func() {
		if err := run.Stop(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "joiner-local: stop Joiner:", err)
		}
	}()
	if o.manifests != "" {
		if err := localrun.ApplyManifests(ctx, env.Config, o.manifests); err != nil {
			return fmt.Errorf("apply %s: %w", o.manifests, err)
		}
	}
	if o.demo {
		return runDemo(ctx, env.Config, run.Operator.CloudProvider, out, 3*time.Minute)
	}
	fmt.Fprintf(out, `
The local cluster is up, with Joiner running on it (webhooks at %s).

  export KUBECONFIG=%s
  kubectl get localnodeclasses,nodepools,provisioningpolicies
  kubectl apply -f policy/library/cpu-limit/policy.yaml     # a Rego policy, enforced at kubectl apply
  kubectl scale deployment inflate --replicas 10
  kubectl get nodeclaims,nodes -w                          # watch nodes appear
  curl -s %s | grep ^karpenter_      # Prometheus metrics, with Karpenter's names

Logs of Joiner and the control-plane processes: %s
Press Ctrl-C to stop everything.
`, run.WebhookURL, abs, run.MetricsURL, env.LogDir)
	<-ctx.Done()
	return nil
}
