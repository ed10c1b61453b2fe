package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/joiner-dev/joiner/cloudprovider/local"
	"github.com/joiner-dev/joiner/operator"
)

func runController(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("joiner controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o operator.Options
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = operator.DefaultNamespace
	}
	fs.StringVar(&o.Namespace, "namespace", ns, "namespace Joiner runs in (default: $POD_NAMESPACE, then joiner-system)")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "port the webhook server listens on")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader for the leader-only controllers; every replica serves webhooks")
	fs.StringVar(&o.CertMode, "cert-mode", operator.CertModeSelfManaged, "webhook certificates: self-managed or cert-manager")
	fs.StringVar(&o.CertManagerIssuer, "cert-manager-issuer", "", "with --cert-mode=cert-manager: Issuer/<name> or ClusterIssuer/<name>; empty creates a self-signed chain")
	tlsMin := fs.String("tls-min-version", "1.2", "lowest TLS version the webhook accepts: 1.2 or 1.3")
	logLevel := fs.String("log-level", "info", "log level: debug, info or error")
	clusterName := fs.String("cluster-name", "", "name of the cluster (tags cloud instances)")
	cloudProvider := fs.String("cloud-provider", "local", "cloud provider: local (instances simulated as kwok Nodes)")
	o.Controllers.Disruption.BindFlags(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: joiner controller [flags]\n\nRuns the operator. Flags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return flagExit(err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "joiner controller: unexpected arguments %v\n", fs.Args())
		return 2
	}
	switch *tlsMin {
	case "1.2":
		o.TLSMinVersion = tls.VersionTLS12
	case "1.3":
		o.TLSMinVersion = tls.VersionTLS13
	default:
		fmt.Fprintf(stderr, "joiner controller: --tls-min-version %q is not supported; use 1.2 or 1.3\n", *tlsMin)
		return 2
	}
	level, err := zapcore.ParseLevel(strings.ToLower(*logLevel))
	if err != nil {
		fmt.Fprintf(stderr, "joiner controller: --log-level %q: use debug, info or error\n", *logLevel)
		return 2
	}
	_ = clusterName
	log := zap.New(zap.Level(level), zap.WriteTo(stderr))
	ctrl.SetLogger(log)
	o.Log = log
	switch *cloudProvider {
	case local.Name:
		o.CloudProvider = local.Factory(local.Options{Log: log.WithName("local-provider")})
	default:
		fmt.Fprintf(stderr, "joiner controller: --cloud-provider %q is not available in this build; use %s\n", *cloudProvider, local.Name)
		return 2
	}

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(stderr, "joiner controller: no Kubernetes configuration (in-cluster, $KUBECONFIG or ~/.kube/config):", err)
		return 1
	}
	operator.TuneGoGC()
	op, err := operator.New(cfg, o)
	if err != nil {
		fmt.Fprintln(stderr, "joiner controller:", err)
		return 1
	}
	if err := op.Start(ctx); err != nil {
		fmt.Fprintln(stderr, "joiner controller:", err)
		return 1
	}
	return 0
}
