package main

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

// This file is the table of Karpenter's settings (v1.14: 22 of core, 12 of the AWS provider) and
// Joiner's own service-cidr, as `joiner controller` takes them. Each row gives the flag, the
// environment variable with Karpenter's name, Karpenter's default and what the setting changes in
// Joiner; the flag, the variable and the help text all come from the row. A flag wins over the
// variable, the variable over the default (settings_resolve.go).

// effect says what a setting does in Joiner.
type effect int

const (
	// supported: the setting changes what Joiner does, as it changes what Karpenter does.
	supported effect = iota
	// notApplicable: Karpenter's meaning does not apply to Joiner (note says why). The setting is
	// accepted, and a value other than the default is logged at start.
	notApplicable
	// notYet: Joiner has no behaviour for the setting yet (note says what is missing). The setting
	// is accepted, and a value other than the default is logged at start as having no effect.
	notYet
)

func (e effect) String() string {
	switch e {
	case notApplicable:
		return "accepted, does not apply to Joiner"
	case notYet:
		return "accepted, no effect in Joiner yet"
	}
	return "supported"
}

// Kinds of setting values, as --help names them.
const (
	kindBool     = "bool"
	kindDuration = "duration"
	kindInt      = "int"
	kindFloat    = "float"
	kindString   = "string"
	kindList     = "list"
)

// setting is one row of the table.
type setting struct {
	// flag is the flag's name (Karpenter's), env the environment variable (Karpenter's).
	flag, env string
	// def is the default, written as the flag takes it.
	def string
	// kind is how the value is written (kindBool, ...).
	kind string
	// usage says what the setting does; target where it lands in Joiner (for --print-settings and
	// the report of what each setting maps to).
	usage, target string
	effect        effect
	// note says why a setting that is not supported has no effect.
	note string
	// apply parses the value and stores it into f; its error says what value is wanted.
	apply func(f *controllerFlags, v string) error
}

// karpenterSettings holds what the settings resolve to that has no field in operator.Options or
// awsFlags, and how each setting was given.
type karpenterSettings struct {
	kubeQPS                             float32
	kubeBurst, metricsPort, probePort   int
	memoryLimit, cpuRequests            int64
	logOutputPaths, logErrorOutputPaths []string
	disableLeaderElection               bool
	// caBundle and serviceCIDR go to the AWS provider; empty ones come from its other sources.
	caBundle, serviceCIDR     string
	amiRefresh, subnetRefresh time.Duration
	// gates are the feature gates in effect, by name (featuregates.go); gatesGiven those
	// FEATURE_GATES or --feature-gates named; gateFrom where a gate's value came from.
	gates, gatesGiven map[string]bool
	gateFrom          map[string]string
	// given is, per flag name, the value each setting took and where from.
	given map[string]givenValue
	// notes name the settings given a value that changes nothing in Joiner, to log at start.
	notes []string
}

// givenValue is the text a setting took and where it came from: "flag", "env" or "default".
type givenValue struct{ text, from string }

// settingsTable is every setting `joiner controller` takes under Karpenter's names.
var settingsTable = []setting{
	// Karpenter core.
	{flag: "karpenter-service", env: "KARPENTER_SERVICE", kind: kindString, target: "operator.Options.ServiceName",
		usage: "name of the Service in front of the webhooks, whose DNS names the serving certificate carries (empty: joiner-webhook)",
		apply: func(f *controllerFlags, v string) error { f.opts.ServiceName = v; return nil }},
	{flag: "metrics-port", env: "METRICS_PORT", def: "8080", kind: kindInt, target: "operator.Options.MetricsAddr (:port, unless --metrics-bind-address is given)",
		usage: "port of the Prometheus metrics endpoint",
		apply: intSetting(1, 65535, func(f *controllerFlags, n int64) { f.karp.metricsPort = int(n) })},
	{flag: "health-probe-port", env: "HEALTH_PROBE_PORT", def: "8081", kind: kindInt, target: "operator.Options.ProbeAddr (:port, unless --health-probe-bind-address is given)",
		usage: "port of /healthz and /readyz",
		apply: intSetting(1, 65535, func(f *controllerFlags, n int64) { f.karp.probePort = int(n) })},
	{flag: "kube-client-qps", env: "KUBE_CLIENT_QPS", def: "200", kind: kindInt, target: "rest.Config.QPS of the controller's Kubernetes client",
		usage: "requests per second the Kubernetes client sends at most",
		apply: intSetting(1, 1<<20, func(f *controllerFlags, n int64) { f.karp.kubeQPS = float32(n) })},
	{flag: "kube-client-burst", env: "KUBE_CLIENT_BURST", def: "300", kind: kindInt, target: "rest.Config.Burst of the controller's Kubernetes client",
		usage: "requests the Kubernetes client may send at once above its QPS",
		apply: intSetting(1, 1<<20, func(f *controllerFlags, n int64) { f.karp.kubeBurst = int(n) })},
	{flag: "enable-profiling", env: "ENABLE_PROFILING", def: "false", kind: kindBool, effect: notYet,
		usage: "serve pprof on the metrics port", note: "the operator does not serve pprof yet",
		apply: boolSetting(func(*controllerFlags, bool) {})},
	{flag: "disable-controller-warmup", env: "DISABLE_CONTROLLER_WARMUP", def: "true", kind: kindBool, effect: notYet,
		usage: "false starts the leader-only controllers' caches before a replica is elected",
		note:  "Joiner's leader-only controllers start their sources when elected; there is no warm-up option yet",
		apply: boolSetting(func(*controllerFlags, bool) {})},
	{flag: "disable-leader-election", env: "DISABLE_LEADER_ELECTION", def: "false", kind: kindBool, target: "operator.Options.LeaderElect = false (an explicit --leader-elect wins over the variable)",
		usage: "run the leader-only controllers without electing a leader (one replica only)",
		apply: boolSetting(func(f *controllerFlags, b bool) { f.karp.disableLeaderElection = b })},
	{flag: "disable-cluster-state-observability", env: "DISABLE_CLUSTER_STATE_OBSERVABILITY", def: "false", kind: kindBool,
		target: "controllers.Options.DisableClusterStateObservability (no karpenter_pods_state)",
		usage:  "turn off the metrics that describe the cluster rather than Joiner's work",
		apply:  boolSetting(func(f *controllerFlags, b bool) { f.opts.Controllers.DisableClusterStateObservability = b })},
	{flag: "leader-election-name", env: "LEADER_ELECTION_NAME", def: "karpenter-leader-election", kind: kindString, effect: notYet,
		usage: "name of the leader-election Lease", note: "Joiner's Lease is always named joiner",
		apply: func(*controllerFlags, string) error { return nil }},
	{flag: "leader-election-namespace", env: "LEADER_ELECTION_NAMESPACE", kind: kindString, effect: notYet,
		usage: "namespace of the leader-election Lease (empty: Joiner's namespace)", note: "Joiner's Lease is always in --namespace",
		apply: func(*controllerFlags, string) error { return nil }},
	{flag: "memory-limit", env: "MEMORY_LIMIT", def: "-1", kind: kindInt, target: "JOINER_MEMORY_LIMIT: the Go soft memory limit is 90% of it (-1: none given)",
		usage: "the container's memory limit in bytes",
		apply: intSetting(-1, 1<<62, func(f *controllerFlags, n int64) { f.karp.memoryLimit = n })},
	{flag: "cpu-requests", env: "CPU_REQUESTS", kind: kindInt, target: "disruption planner Workers = ceil(v/1000), unless --consolidation-workers is given",
		usage: "the container's CPU request in millicores; sizes the parallel consolidation simulations (empty: one per CPU Joiner may use, where Karpenter assumes 1000)",
		apply: func(f *controllerFlags, v string) error {
			if v == "" {
				return nil
			}
			return intSetting(1, 1<<30, func(f *controllerFlags, n int64) { f.karp.cpuRequests = n })(f, v)
		}},
	{flag: "log-level", env: "LOG_LEVEL", def: "info", kind: kindString, target: "the controller's log level",
		usage: "log level: debug, info or error", apply: applyLogLevel},
	{flag: "log-output-paths", env: "LOG_OUTPUT_PATHS", def: "stdout", kind: kindList, target: "where the controller's log goes",
		usage: "comma-separated outputs of the log: stdout, stderr or file paths",
		apply: listSetting(func(f *controllerFlags, l []string) { f.karp.logOutputPaths = l })},
	{flag: "log-error-output-paths", env: "LOG_ERROR_OUTPUT_PATHS", def: "stderr", kind: kindList, target: "where the logger's own errors go",
		usage: "comma-separated outputs of the logger's own errors: stdout, stderr or file paths",
		apply: listSetting(func(f *controllerFlags, l []string) { f.karp.logErrorOutputPaths = l })},
	{flag: "batch-max-duration", env: "BATCH_MAX_DURATION", def: "10s", kind: kindDuration, target: "controllers.Options.Provisioning.BatchMaxDuration",
		usage: "longest a batch of pending pods stays open before it is provisioned",
		apply: durationSetting(time.Millisecond, func(f *controllerFlags, d time.Duration) { f.opts.Controllers.Provisioning.BatchMaxDuration = d })},
	{flag: "batch-idle-duration", env: "BATCH_IDLE_DURATION", def: "1s", kind: kindDuration, target: "controllers.Options.Provisioning.BatchIdle",
		usage: "a batch of pending pods closes once no new pod arrived for this long",
		apply: durationSetting(time.Millisecond, func(f *controllerFlags, d time.Duration) { f.opts.Controllers.Provisioning.BatchIdle = d })},
	{flag: "preference-policy", env: "PREFERENCE_POLICY", def: "Respect", kind: kindString, target: "controllers.Options.Provisioning.Scheduling.PreferencePolicy (provisioning and consolidation)",
		usage: "Respect or Ignore the pods' preferred affinities and ScheduleAnyway spreads",
		apply: enumSetting(func(f *controllerFlags, v string) {
			f.opts.Controllers.Provisioning.Scheduling.PreferencePolicy = scheduling.PreferencePolicy(v)
		}, string(scheduling.PreferencePolicyRespect), string(scheduling.PreferencePolicyIgnore))},
	{flag: "min-values-policy", env: "MIN_VALUES_POLICY", def: "Strict", kind: kindString, target: "controllers.Options.Provisioning.Scheduling.MinValuesPolicy (provisioning and consolidation)",
		usage: "Strict fails a NodeClaim that cannot meet a requirement's minValues; BestEffort relaxes it",
		apply: enumSetting(func(f *controllerFlags, v string) {
			f.opts.Controllers.Provisioning.Scheduling.MinValuesPolicy = scheduling.MinValuesPolicy(v)
		}, string(scheduling.MinValuesPolicyStrict), string(scheduling.MinValuesPolicyBestEffort))},
	{flag: "ignore-dra-requests", env: "IGNORE_DRA_REQUESTS", def: "true", kind: kindBool, target: "controllers.Options.Provisioning.ModelDRARequests = !value",
		usage: "schedule pods as if they made no Dynamic Resource Allocation requests; false makes provisioning model the ResourceClaims of known GPU and accelerator device classes and launch nothing for other claims (README: Dynamic Resource Allocation)",
		apply: boolSetting(func(f *controllerFlags, b bool) { f.opts.Controllers.Provisioning.ModelDRARequests = !b })},
	{flag: "feature-gates", env: "FEATURE_GATES", kind: kindList, target: "see the gates",
		usage: "comma-separated Name=true|false; omitted gates keep their defaults: " + gateDefaults(),
		apply: applyFeatureGates},

	// Karpenter's AWS provider.
	{flag: "cluster-ca-bundle", env: "CLUSTER_CA_BUNDLE", kind: kindString, target: "aws.Options.ClusterCABundle (empty: the CA of Joiner's own kube client, then eks:DescribeCluster)",
		usage: "with aws: base64 PEM certificate authority nodes trust the API server with",
		apply: func(f *controllerFlags, v string) error { f.karp.caBundle = v; return nil }},
	{flag: "cluster-name", env: "CLUSTER_NAME", kind: kindString, target: "aws.Options.ClusterName",
		usage: "name of the cluster; tags cloud instances and launch templates (required with --cloud-provider=aws)",
		apply: func(f *controllerFlags, v string) error { f.aws.clusterName = v; return nil }},
	{flag: "cluster-endpoint", env: "CLUSTER_ENDPOINT", kind: kindString, target: "aws.Options.ClusterEndpoint (empty: eks:DescribeCluster)",
		usage: "with aws: API server URL nodes join (empty: asks eks:DescribeCluster)", apply: applyClusterEndpoint},
	{flag: "isolated-vpc", env: "ISOLATED_VPC", def: "false", kind: kindBool, effect: notApplicable,
		usage: "the VPC has no route to the public AWS APIs (Karpenter then stops calling the Pricing API)",
		note:  "Joiner never calls the AWS Pricing API: on-demand prices come from its embedded catalog, spot prices from EC2",
		apply: boolSetting(func(*controllerFlags, bool) {})},
	{flag: "eks-control-plane", env: "EKS_CONTROL_PLANE", def: "false", kind: kindBool, effect: notApplicable,
		usage: "take the Kubernetes version from eks:DescribeCluster",
		note:  "Joiner reads the Kubernetes version from the API server, which on EKS is the control plane's own",
		apply: boolSetting(func(*controllerFlags, bool) {})},
	{flag: "vm-memory-overhead-percent", env: "VM_MEMORY_OVERHEAD_PERCENT", def: "0.075", kind: kindFloat, target: "aws.Options.VMMemoryOverheadPercent",
		usage: "with aws: share of an instance type's memory taken off for the hypervisor",
		apply: floatSetting(func(f *controllerFlags, x float64) { f.aws.vmMemoryOverheadPercent = x })},
	{flag: "interruption-queue", env: "INTERRUPTION_QUEUE", kind: kindString, target: "aws.FactoryOptions.InterruptionQueue (empty: no interruption handling)",
		usage: "with aws: name of the SQS queue of EC2 interruption events",
		apply: func(f *controllerFlags, v string) error { f.aws.interruptionQueue = v; return nil }},
	{flag: "reserved-enis", env: "RESERVED_ENIS", def: "0", kind: kindInt, target: "aws.Options.ReservedENIs",
		usage: "with aws: network interfaces kept out of the ENI-limited pod density",
		apply: intSetting(-1<<20, 1<<20, func(f *controllerFlags, n int64) { f.aws.reservedENIs = int(n) })},
	{flag: "disable-dry-run", env: "DISABLE_DRY_RUN", def: "false", kind: kindBool, effect: notApplicable,
		usage: "skip the dry-run calls that check an EC2NodeClass's permissions",
		note:  "Joiner makes no dry-run calls, so there is nothing to skip",
		apply: boolSetting(func(*controllerFlags, bool) {})},
	{flag: "enable-zonal-shift", env: "ENABLE_ZONAL_SHIFT", def: "false", kind: kindBool, effect: notYet,
		usage: "avoid zones under an ARC zonal shift", note: "Joiner does not read ARC zonal shifts yet",
		apply: boolSetting(func(*controllerFlags, bool) {})},
	{flag: "ami-refresh-interval", env: "AMI_REFRESH_INTERVAL", def: "1m", kind: kindDuration, target: "aws nodeclass.Options.AMITTL",
		usage: "with aws: how long resolved AMIs are reused before EC2NodeClasses look them up again (at least 1m)",
		apply: durationSetting(time.Minute, func(f *controllerFlags, d time.Duration) { f.karp.amiRefresh = d })},
	{flag: "subnet-refresh-interval", env: "SUBNET_REFRESH_INTERVAL", def: "1m", kind: kindDuration, target: "aws nodeclass.Options.SubnetTTL",
		usage: "with aws: how long resolved subnets are reused before EC2NodeClasses look them up again (at least 1m)",
		apply: durationSetting(time.Minute, func(f *controllerFlags, d time.Duration) { f.karp.subnetRefresh = d })},

	// Joiner's own: Karpenter asks eks:DescribeCluster for it.
	{flag: "service-cidr", env: "SERVICE_CIDR", kind: kindString, target: "aws.Options.ServiceCIDR (empty: the cluster's ServiceCIDR kubernetes, then eks:DescribeCluster)",
		usage: "with aws: the cluster's service CIDR, which AL2023 nodes need (Joiner's own setting)", apply: applyServiceCIDR},
}

// applyClusterEndpoint takes an absolute https URL, as Karpenter does.
func applyClusterEndpoint(f *controllerFlags, v string) error {
	if v != "" && !strings.HasPrefix(v, "https://") && !strings.HasPrefix(v, "http://") {
		return fmt.Errorf("want an absolute URL such as https://ABC.gr7.us-east-1.eks.amazonaws.com")
	}
	f.aws.clusterEndpoint = v
	return nil
}

// applyServiceCIDR takes an IPv4 or IPv6 prefix.
func applyServiceCIDR(f *controllerFlags, v string) error {
	if v != "" {
		if _, err := netip.ParsePrefix(v); err != nil {
			return fmt.Errorf("want a CIDR such as 10.100.0.0/16: %w", err)
		}
	}
	f.karp.serviceCIDR = v
	return nil
}
