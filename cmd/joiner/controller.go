package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/providers/aws"
	"github.com/joiner-dev/joiner/providers/aws/nodeclass"
	"github.com/joiner-dev/joiner/providers/local"
)

// controllerFlags are the settings `joiner controller` takes from its command line.
type controllerFlags struct {
	opts          operator.Options
	logLevel      zapcore.Level
	cloudProvider string
	aws           awsFlags
	// karp holds what Karpenter's settings resolve to beyond opts and aws (settings.go).
	karp karpenterSettings
}

// awsFlags are the settings of --cloud-provider=aws. Region, credentials and endpoints come from
// the AWS SDK's standard chains (AWS_REGION, IRSA or EKS Pod Identity, AWS_ENDPOINT_URL, ...).
type awsFlags struct {
	clusterName, clusterEndpoint, endpointURL, interruptionQueue string
	vmMemoryOverheadPercent                                      float64
	reservedENIs                                                 int
}

// errBadFlags says that parseControllerFlags has reported a bad command line on its error output.
var errBadFlags = errors.New("bad command line")

// parseControllerFlags parses the command line of `joiner controller`. It reports a bad command line on
// stderr itself, as the flag package does, and then returns errBadFlags; on --help it returns
// flag.ErrHelp.
func parseControllerFlags(args []string, stderr io.Writer) (controllerFlags, error) {
	fs := flag.NewFlagSet("joiner controller", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f controllerFlags
	o := &f.opts
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = operator.DefaultNamespace
	}
	fs.StringVar(&o.Namespace, "namespace", ns, "namespace Joiner runs in (default: $POD_NAMESPACE, then joiner-system)")
	fs.IntVar(&o.WebhookPort, "webhook-port", 9443, "port the webhook server listens on")
	fs.Var((*ipListFlag)(&o.WebhookIPs), "webhook-cert-ips", "comma-separated IP addresses added to the webhook serving certificate, for an apiserver that calls the webhooks by URL (127.0.0.1 in e2e/scale)")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint; 0 disables it")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader for the leader-only controllers; every replica serves webhooks")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", operator.DefaultLeaseDuration,
		"with --leader-elect: how long after the leader last renewed its Lease a follower may take leadership over")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", operator.DefaultRenewDeadline,
		"with --leader-elect: how long the leader tries to renew its Lease before it stops its leader-only controllers and campaigns again; shorter than the lease duration")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", operator.DefaultRetryPeriod,
		"with --leader-elect: how often the leader renews its Lease and followers try to take it")
	fs.StringVar(&o.CertMode, "cert-mode", operator.CertModeSelfManaged, "webhook certificates: self-managed or cert-manager")
	fs.StringVar(&o.CertManagerIssuer, "cert-manager-issuer", "", "with --cert-mode=cert-manager: Issuer/<name> or ClusterIssuer/<name>; empty creates a self-signed chain")
	budget := memoryBudgetFlag(policy.DefaultMemoryBudget)
	fs.Var(&budget, "policy-memory-budget", "how much the heap may grow while the ProvisioningPolicies of one admission or audited object are evaluated, "+
		"as a `quantity` of bytes such as 256Mi or 1Gi; a policy evaluated past it fails (a Deny policy then denies). 0 or a negative value disables the budget")
	tlsMin := fs.String("tls-min-version", "1.2", "lowest TLS version the webhook accepts: 1.2 or 1.3")
	fs.StringVar(&f.cloudProvider, "cloud-provider", "local", "cloud provider: local (instances simulated as kwok Nodes) or aws (EC2)")
	fs.StringVar(&f.aws.endpointURL, "aws-endpoint-url", "", "with aws: send every AWS call to this URL (tests against an emulator); empty uses the SDK's chain (AWS_ENDPOINT_URL...)")
	o.Controllers.Disruption.BindFlags(fs)
	// Karpenter's settings, as flags and environment variables (settings.go).
	settings := bindSettings(fs)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: joiner controller [flags]\n\nRuns the operator. Flags:")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		reportUnknownFlag(fs, err, stderr)
		return f, errBadFlags // the flag package has printed the error and the usage
	}
	bad := func(format string, a ...any) (controllerFlags, error) {
		fmt.Fprintf(stderr, "joiner controller: "+format+"\n", a...)
		return f, errBadFlags
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments %v", fs.Args())
	}
	if err := settings.resolve(&f, os.LookupEnv, os.Environ()); err != nil {
		return bad("%v", err)
	}
	if settings.printSettings {
		printSettings(stderr, &f)
		return f, flag.ErrHelp
	}
	switch *tlsMin {
	case "1.2":
		o.TLSMinVersion = tls.VersionTLS12
	case "1.3":
		o.TLSMinVersion = tls.VersionTLS13
	default:
		return bad("--tls-min-version %q is not supported; use 1.2 or 1.3", *tlsMin)
	}
	if o.LeaderElect {
		if err := operator.CheckLeaderElectionTimings(o.LeaseDuration, o.RenewDeadline, o.RetryPeriod); err != nil {
			return bad("%v", err)
		}
	}
	o.PolicyMemoryBudget = budget.engineBudget()
	switch f.cloudProvider {
	case local.Name:
	case aws.Name:
		if f.aws.clusterName == "" {
			return bad("--cluster-name is required with --cloud-provider=aws")
		}
		if f.aws.vmMemoryOverheadPercent < 0 || f.aws.vmMemoryOverheadPercent >= 1 {
			return bad("--vm-memory-overhead-percent %v: want a fraction in [0, 1), such as 0.075", f.aws.vmMemoryOverheadPercent)
		}
		if f.aws.reservedENIs < 0 {
			return bad("--reserved-enis %d: want 0 or more", f.aws.reservedENIs)
		}
	default:
		return bad("--cloud-provider %q is not available in this build; use %s or %s", f.cloudProvider, local.Name, aws.Name)
	}
	return f, nil
}

// ipListFlag is a comma-separated list of IP addresses, such as --webhook-cert-ips=127.0.0.1,::1.
type ipListFlag []net.IP

// String renders the list as it is written on the command line.
func (l *ipListFlag) String() string {
	parts := make([]string, 0, len(*l))
	for _, ip := range *l {
		parts = append(parts, ip.String())
	}
	return strings.Join(parts, ",")
}

// Set parses the list; empty entries are skipped, anything else must be an IP address.
func (l *ipListFlag) Set(s string) error {
	var ips []net.IP
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v == "" {
			continue
		}
		ip := net.ParseIP(v)
		if ip == nil {
			return fmt.Errorf("%q is not an IP address", v)
		}
		ips = append(ips, ip)
	}
	*l = ips
	return nil
}

// awsFactory returns the AWS provider's factory for the flags: the SDK's standard configuration
// (with --aws-endpoint-url), the apiserver's version for the EC2NodeClass controller's alias
// terms, and what nodes need to join from Joiner's own kube client where the settings leave it
// out: its certificate authority, and a reader of the cluster's service CIDR.
func (f controllerFlags) awsFactory(cfg *rest.Config, log logr.Logger) (cloudprovider.Factory, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	opts := f.awsFactoryOptions(log, nodeclass.VersionFromDiscovery(dc, nil))
	if opts.ClusterCABundle == "" {
		if opts.ClusterCABundle, err = aws.CABundleFromRESTConfig(cfg); err != nil {
			return nil, fmt.Errorf("--cluster-ca-bundle is not set: %w", err)
		}
	}
	if opts.ClusterReader, err = client.New(cfg, client.Options{}); err != nil {
		return nil, fmt.Errorf("client of the cluster's service CIDR: %w", err)
	}
	return aws.Factory(opts), nil
}

// awsFactoryOptions maps the flags onto aws.FactoryOptions.
func (f controllerFlags) awsFactoryOptions(log logr.Logger, version func(context.Context) (string, error)) aws.FactoryOptions {
	return aws.FactoryOptions{
		Options: aws.Options{
			ClusterName:             f.aws.clusterName,
			ClusterEndpoint:         f.aws.clusterEndpoint,
			ClusterCABundle:         f.karp.caBundle,
			ServiceCIDR:             f.karp.serviceCIDR,
			Log:                     log.WithName("aws-provider"),
			VMMemoryOverheadPercent: f.aws.vmMemoryOverheadPercent,
			ReservedENIs:            f.aws.reservedENIs,
		},
		ConfigOptions: aws.ConfigOptions{EndpointURL: f.aws.endpointURL},
		NodeClass: nodeclass.Options{KubernetesVersion: version, AMITTL: f.karp.amiRefresh, SubnetTTL: f.karp.subnetRefresh,
			DisableCapacityReservations: !f.karp.gates["ReservedCapacity"]},
		InterruptionQueue: f.aws.interruptionQueue,
	}
}

func runController(ctx context.Context, args []string, stderr io.Writer) int {
	f, err := parseControllerFlags(args, stderr)
	if err != nil {
		return flagExit(err)
	}
	o := f.opts
	log, closeLog, err := f.newLogger(os.Stdout, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "joiner controller:", err)
		return 1
	}
	defer closeLog()
	ctrl.SetLogger(log)
	o.Log = log
	for _, note := range f.karp.notes {
		log.Info("a Karpenter setting was given that changes nothing in Joiner", "setting", note)
	}
	o.BuildInfo = operator.BuildInfo{Version: version, Commit: commit}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		fmt.Fprintln(stderr, "joiner controller: no Kubernetes configuration (in-cluster, $KUBECONFIG or ~/.kube/config):", err)
		return 1
	}
	cfg.QPS, cfg.Burst = f.karp.kubeQPS, f.karp.kubeBurst
	switch f.cloudProvider {
	case local.Name:
		o.CloudProvider = local.Factory(local.Options{Log: log.WithName("local-provider")})
	case aws.Name:
		if o.CloudProvider, err = f.awsFactory(cfg, log); err != nil {
			fmt.Fprintln(stderr, "joiner controller: aws provider:", err)
			return 1
		}
	}
	if f.karp.memoryLimit > 0 {
		// Karpenter's MEMORY_LIMIT is the container limit operator.TuneGoGC reads as JOINER_MEMORY_LIMIT.
		if err := os.Setenv(operator.MemoryLimitEnv, strconv.FormatInt(f.karp.memoryLimit, 10)); err != nil {
			fmt.Fprintln(stderr, "joiner controller: --memory-limit:", err)
			return 1
		}
	}
	operator.TuneGoGC()
	// TuneGoGC applies the memory limit but does not say what it decided. TuneMemoryLimit reads the same
	// environment and cgroup file, so it sets the same limit again, and returns the decision to log.
	limit, source, limitErr := operator.TuneMemoryLimit()
	logMemorySettings(log, os.Getenv, limit, source, limitErr, o.PolicyMemoryBudget)
	// Run campaigns again in this process when the Lease is lost, so leadership survives an API
	// server outage also outside a pod (nothing would restart the process).
	if err := operator.Run(ctx, cfg, o); err != nil {
		fmt.Fprintln(stderr, "joiner controller:", err)
		return 1
	}
	return 0
}

// minPolicyMemoryBudget is the smallest budget --policy-memory-budget accepts. The heap is the
// process's, and serving one request or a watch event allocates tens of kilobytes, so a smaller budget
// would stop, and for Deny policies deny, ordinary evaluations; it is most likely a unit left out
// (256 for 256Mi).
const minPolicyMemoryBudget = 1 << 20

// memoryBudgetFlag is --policy-memory-budget: a Kubernetes quantity of bytes (256Mi, 1Gi, 500M,
// 268435456), as a container's memory limit is written. Zero or a negative quantity disables the
// budget.
type memoryBudgetFlag int64

// String renders the budget as a quantity, such as 256Mi, or 0 when it is disabled.
func (b *memoryBudgetFlag) String() string {
	if *b <= 0 {
		return "0"
	}
	return resource.NewQuantity(int64(*b), resource.BinarySI).String()
}

// Set parses a quantity of bytes; zero and negative quantities disable the budget.
func (b *memoryBudgetFlag) Set(s string) error {
	q, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("want a quantity of bytes such as 256Mi or 1Gi, or 0 to disable the budget: %w", err)
	}
	if q.Sign() <= 0 {
		*b = 0
		return nil
	}
	n := q.Value() // rounded up to a whole byte
	switch {
	case resource.NewQuantity(n, resource.BinarySI).Cmp(q) != 0:
		return fmt.Errorf("%s is not a whole number of bytes (a lower-case m means thousandths); write the budget in Mi or Gi, such as 256Mi", q.String())
	case n < minPolicyMemoryBudget:
		return fmt.Errorf("%d bytes is below the smallest budget, 1Mi, and would stop ordinary evaluations; give a unit, such as 256Mi, or 0 to disable the budget", n)
	}
	*b = memoryBudgetFlag(n)
	return nil
}

// engineBudget returns the budget as operator.Options.PolicyMemoryBudget takes it: bytes, or -1 when
// the budget is disabled (0 there means the default).
func (b memoryBudgetFlag) engineBudget() int64 {
	if b <= 0 {
		return -1
	}
	return int64(b)
}

// logMemorySettings logs, at start, the Go soft memory limit operator.TuneMemoryLimit decided on (limit
// in bytes, 0 when it set none; source, where the container's limit came from; err, a source that could
// not be read) next to the policy memory budget (bytes, negative when disabled), and warns when the
// budget cannot protect the limit.
func logMemorySettings(log logr.Logger, getenv func(string) string, limit int64, source string, err error, budget int64) {
	kv := []any{"source", source}
	if source == "GOMEMLIMIT" {
		kv = append(kv, "GOMEMLIMIT", getenv("GOMEMLIMIT"))
	} else {
		kv = append(kv, "goMemoryLimitBytes", limit)
	}
	if budget > 0 {
		kv = append(kv, "policyMemoryBudgetBytes", budget)
	} else {
		kv = append(kv, "policyMemoryBudget", "disabled")
	}
	switch {
	case err != nil:
		log.Error(err, "the container memory limit could not be read, so the Go memory limit may be missing or come from the other source; "+
			"set "+operator.MemoryLimitEnv+" to the container's memory limit (resourceFieldRef limits.memory)", kv...)
	case source == "GOMEMLIMIT":
		log.Info("Go memory limit set by the GOMEMLIMIT environment variable", kv...)
	case source == operator.MemoryLimitDefault:
		log.Info("no container memory limit found, so the Go runtime's soft memory limit is the default; set "+operator.MemoryLimitEnv+
			" to the container's memory limit (resourceFieldRef limits.memory), or GOMEMLIMIT, to change it", kv...)
	case limit > 0:
		log.Info(fmt.Sprintf("Go memory limit set to %d%% of the container memory limit", operator.MemoryLimitPercent), kv...)
	default:
		log.Info("no container memory limit found, so the Go runtime runs without a memory limit; set "+operator.MemoryLimitEnv+
			" to the container's memory limit (resourceFieldRef limits.memory) to give it one", kv...)
	}
	if budget > 0 && limit > 0 && budget >= limit {
		log.Info("warning: the policy memory budget is not below the Go memory limit, so a runaway policy can exhaust the operator's memory before the budget stops it; "+
			"lower --policy-memory-budget", kv...)
	}
}
