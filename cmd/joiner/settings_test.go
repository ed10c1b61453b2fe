package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"github.com/joiner-dev/joiner/providers/aws"
)

// settingCase is one row of the settings table as a test sees it: a value other than the default,
// and the option both the flag and the variable must bring it to.
type settingCase struct {
	flag, value string
	// option reads the option the setting reaches, as text; want and def are what it must read
	// with value and with the setting left out.
	option    func(f controllerFlags) string
	want, def string
}

// awsOption reads an option of the AWS provider's factory (the setting's target with aws).
func awsOption(read func(o aws.FactoryOptions) any) func(f controllerFlags) string {
	return func(f controllerFlags) string {
		return fmt.Sprint(read(f.awsFactoryOptions(logr.Discard(), func(context.Context) (string, error) { return "1.36", nil })))
	}
}

// noted reads whether the setting was noted at start as changing nothing in Joiner.
func noted(flagName string) func(f controllerFlags) string {
	return func(f controllerFlags) string {
		for _, n := range f.karp.notes {
			if strings.HasPrefix(n, flagName+"=") {
				return "noted: " + n
			}
		}
		return "not noted"
	}
}

// settingCases covers every row of settingsTable (TestEverySettingHasACase holds it to that).
var settingCases = []settingCase{
	{flag: "karpenter-service", value: "karpenter", option: func(f controllerFlags) string { return f.opts.ServiceName }, want: "karpenter", def: ""},
	{flag: "metrics-port", value: "9090", option: func(f controllerFlags) string { return f.opts.MetricsAddr }, want: ":9090", def: ":8080"},
	{flag: "health-probe-port", value: "9091", option: func(f controllerFlags) string { return f.opts.ProbeAddr }, want: ":9091", def: ":8081"},
	{flag: "kube-client-qps", value: "50", option: func(f controllerFlags) string { return fmt.Sprint(f.karp.kubeQPS) }, want: "50", def: "200"},
	{flag: "kube-client-burst", value: "70", option: func(f controllerFlags) string { return fmt.Sprint(f.karp.kubeBurst) }, want: "70", def: "300"},
	{flag: "enable-profiling", value: "true", option: noted("enable-profiling"),
		want: "noted: enable-profiling=true (from {source}): accepted, no effect in Joiner yet: the operator does not serve pprof yet", def: "not noted"},
	{flag: "disable-controller-warmup", value: "false", option: noted("disable-controller-warmup"),
		want: "noted: disable-controller-warmup=false (from {source}): accepted, no effect in Joiner yet: Joiner's leader-only controllers start their sources when elected; there is no warm-up option yet", def: "not noted"},
	{flag: "disable-leader-election", value: "true", option: func(f controllerFlags) string { return fmt.Sprint(f.opts.LeaderElect) }, want: "false", def: "true"},
	{flag: "disable-cluster-state-observability", value: "true",
		option: func(f controllerFlags) string { return fmt.Sprint(f.opts.Controllers.DisableClusterStateObservability) }, want: "true", def: "false"},
	{flag: "leader-election-name", value: "other", option: noted("leader-election-name"),
		want: "noted: leader-election-name=other (from {source}): accepted, no effect in Joiner yet: Joiner's Lease is always named joiner", def: "not noted"},
	{flag: "leader-election-namespace", value: "kube-system", option: noted("leader-election-namespace"),
		want: "noted: leader-election-namespace=kube-system (from {source}): accepted, no effect in Joiner yet: Joiner's Lease is always in --namespace", def: "not noted"},
	{flag: "memory-limit", value: "1073741824", option: func(f controllerFlags) string { return fmt.Sprint(f.karp.memoryLimit) }, want: "1073741824", def: "-1"},
	{flag: "cpu-requests", value: "2500", option: func(f controllerFlags) string { return fmt.Sprint(f.opts.Controllers.Disruption.Planner.Workers) }, want: "3", def: "0"},
	{flag: "log-level", value: "debug", option: func(f controllerFlags) string { return f.logLevel.String() }, want: "debug", def: "info"},
	{flag: "log-output-paths", value: "stdout,/var/log/joiner.log", option: func(f controllerFlags) string { return fmt.Sprint(f.karp.logOutputPaths) },
		want: "[stdout /var/log/joiner.log]", def: "[stdout]"},
	{flag: "log-error-output-paths", value: "stdout", option: func(f controllerFlags) string { return fmt.Sprint(f.karp.logErrorOutputPaths) }, want: "[stdout]", def: "[stderr]"},
	{flag: "batch-max-duration", value: "15s", option: func(f controllerFlags) string { return f.opts.Controllers.Provisioning.BatchMaxDuration.String() }, want: "15s", def: "10s"},
	{flag: "batch-idle-duration", value: "500ms", option: func(f controllerFlags) string { return f.opts.Controllers.Provisioning.BatchIdle.String() }, want: "500ms", def: "1s"},
	{flag: "preference-policy", value: "Ignore", option: func(f controllerFlags) string {
		return string(f.opts.Controllers.Provisioning.Scheduling.PreferencePolicy)
	},
		want: "Ignore", def: "Respect"},
	{flag: "min-values-policy", value: "BestEffort", option: func(f controllerFlags) string {
		return string(f.opts.Controllers.Provisioning.Scheduling.MinValuesPolicy)
	},
		want: "BestEffort", def: "Strict"},
	{flag: "ignore-dra-requests", value: "false", option: func(f controllerFlags) string { return fmt.Sprint(f.opts.Controllers.Provisioning.ModelDRARequests) },
		want: "true", def: "false"},
	{flag: "feature-gates", value: "SpotToSpotConsolidation=true", option: func(f controllerFlags) string { return fmt.Sprint(f.opts.Controllers.Disruption.Planner.SpotToSpot) },
		want: "true", def: "false"},
	{flag: "cluster-ca-bundle", value: "Q0E=", option: awsOption(func(o aws.FactoryOptions) any { return o.ClusterCABundle }), want: "Q0E=", def: ""},
	{flag: "cluster-name", value: "prod", option: awsOption(func(o aws.FactoryOptions) any { return o.ClusterName }), want: "prod", def: ""},
	{flag: "cluster-endpoint", value: "https://api.prod", option: awsOption(func(o aws.FactoryOptions) any { return o.ClusterEndpoint }), want: "https://api.prod", def: ""},
	{flag: "isolated-vpc", value: "true", option: noted("isolated-vpc"),
		want: "noted: isolated-vpc=true (from {source}): accepted, does not apply to Joiner: Joiner never calls the AWS Pricing API: on-demand prices come from its embedded catalog, spot prices from EC2",
		def:  "not noted"},
	{flag: "eks-control-plane", value: "true", option: noted("eks-control-plane"),
		want: "noted: eks-control-plane=true (from {source}): accepted, does not apply to Joiner: Joiner reads the Kubernetes version from the API server, which on EKS is the control plane's own",
		def:  "not noted"},
	{flag: "vm-memory-overhead-percent", value: "0.1", option: awsOption(func(o aws.FactoryOptions) any { return o.VMMemoryOverheadPercent }), want: "0.1", def: "0.075"},
	{flag: "interruption-queue", value: "prod-queue", option: awsOption(func(o aws.FactoryOptions) any { return o.InterruptionQueue }), want: "prod-queue", def: ""},
	{flag: "reserved-enis", value: "2", option: awsOption(func(o aws.FactoryOptions) any { return o.ReservedENIs }), want: "2", def: "0"},
	{flag: "disable-dry-run", value: "true", option: noted("disable-dry-run"),
		want: "noted: disable-dry-run=true (from {source}): accepted, does not apply to Joiner: Joiner makes no dry-run calls, so there is nothing to skip", def: "not noted"},
	{flag: "enable-zonal-shift", value: "true", option: noted("enable-zonal-shift"),
		want: "noted: enable-zonal-shift=true (from {source}): accepted, no effect in Joiner yet: Joiner does not read ARC zonal shifts yet", def: "not noted"},
	{flag: "ami-refresh-interval", value: "5m", option: awsOption(func(o aws.FactoryOptions) any { return o.NodeClass.AMITTL }), want: "5m0s", def: "1m0s"},
	{flag: "subnet-refresh-interval", value: "2m", option: awsOption(func(o aws.FactoryOptions) any { return o.NodeClass.SubnetTTL }), want: "2m0s", def: "1m0s"},
	{flag: "service-cidr", value: "10.100.0.0/16", option: awsOption(func(o aws.FactoryOptions) any { return o.ServiceCIDR }), want: "10.100.0.0/16", def: ""},
}

// parse parses args as `joiner controller` does, failing the test on an error.
func parse(t *testing.T, args ...string) controllerFlags {
	t.Helper()
	var stderr bytes.Buffer
	f, err := parseControllerFlags(args, &stderr)
	if err != nil {
		t.Fatalf("parse %v: %v\n%s", args, err, stderr.String())
	}
	return f
}

// rowOf returns the row of the table a flag names.
func rowOf(t *testing.T, name string) *setting {
	t.Helper()
	for i := range settingsTable {
		if settingsTable[i].flag == name {
			return &settingsTable[i]
		}
	}
	t.Fatalf("no setting --%s in the table", name)
	return nil
}

// TestSettingsReachTheirOptions: for every setting, the flag and Karpenter's environment variable
// bring the same value to the same option; with neither the option holds Karpenter's default; and
// the flag wins over the variable.
func TestSettingsReachTheirOptions(t *testing.T) {
	for _, tc := range settingCases {
		row := rowOf(t, tc.flag)
		want := func(source string) string { return strings.ReplaceAll(tc.want, "{source}", source) }
		t.Run(tc.flag, func(t *testing.T) {
			if got := tc.option(parse(t)); got != tc.def {
				t.Errorf("default: %q, want %q", got, tc.def)
			}
			if got := tc.option(parse(t, "--"+tc.flag+"="+tc.value)); got != want("--"+tc.flag) {
				t.Errorf("--%s=%s: %q, want %q", tc.flag, tc.value, got, want("--"+tc.flag))
			}
			t.Setenv(row.env, tc.value)
			if got := tc.option(parse(t)); got != want(row.env) {
				t.Errorf("%s=%s: %q, want %q", row.env, tc.value, got, want(row.env))
			}
			if got := tc.option(parse(t, "--"+tc.flag+"="+row.def)); got != tc.def {
				t.Errorf("%s=%s and --%s=%s: %q, want the flag's %q", row.env, tc.value, tc.flag, row.def, got, tc.def)
			}
		})
	}
}

// TestEverySettingHasACase: a row added to the table without a case above fails here.
func TestEverySettingHasACase(t *testing.T) {
	covered := map[string]bool{}
	for _, tc := range settingCases {
		covered[tc.flag] = true
	}
	for _, row := range settingsTable {
		if !covered[row.flag] {
			t.Errorf("setting --%s (%s) has no case in settingCases", row.flag, row.env)
		}
	}
	if len(settingsTable) != 35 {
		t.Errorf("%d settings, want Karpenter v1.14's 34 and Joiner's service-cidr", len(settingsTable))
	}
}

// TestBadSettings: a bad value is an error naming the flag or the variable it came from and what
// is wanted; a misspelt flag or variable names the setting meant.
func TestBadSettings(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{name: "duration flag", args: []string{"--batch-max-duration=soon"}, want: `--batch-max-duration "soon": want a duration such as 10s, 500ms or 1m`},
		{name: "duration variable", env: map[string]string{"BATCH_IDLE_DURATION": "1 second"},
			want: `environment variable BATCH_IDLE_DURATION="1 second": want a duration such as 10s, 500ms or 1m`},
		{name: "refresh below a minute", args: []string{"--ami-refresh-interval=30s"}, want: `--ami-refresh-interval "30s": want a duration of at least 1m0s`},
		{name: "bool other than true or false", env: map[string]string{"ISOLATED_VPC": "yes"}, want: `ISOLATED_VPC="yes": want true or false`},
		{name: "policy in the wrong case", args: []string{"--preference-policy=respect"}, want: `--preference-policy "respect": want Respect or Ignore (did you mean Respect?)`},
		{name: "min-values policy", env: map[string]string{"MIN_VALUES_POLICY": "BestEfort"}, want: `want Strict or BestEffort (did you mean BestEffort?)`},
		{name: "port out of range", args: []string{"--metrics-port=70000"}, want: `--metrics-port "70000": want a whole number from 1 to 65535`},
		{name: "service link variable", env: map[string]string{"METRICS_PORT": "tcp://10.96.0.7:8080"},
			want: "service link variable Kubernetes adds for a Service of that name: set enableServiceLinks: false on the pod, or give the flag"},
		{name: "negative overhead", args: []string{"--vm-memory-overhead-percent=-0.1"}, want: "want a number of 0 or more, such as 0.075"},
		{name: "endpoint not a URL", env: map[string]string{"CLUSTER_ENDPOINT": "ABC.gr7.us-east-1.eks.amazonaws.com"}, want: "want an absolute URL"},
		{name: "service CIDR", args: []string{"--service-cidr=10.100.0.0"}, want: `--service-cidr "10.100.0.0": want a CIDR such as 10.100.0.0/16`},
		{name: "log level", env: map[string]string{"LOG_LEVEL": "warn"}, want: `LOG_LEVEL="warn": use debug, info or error`},
		{name: "empty log outputs", args: []string{"--log-output-paths=,"}, want: "want one or more comma-separated outputs"},
		{name: "misspelt flag", args: []string{"--batch-max-duraton=5s"}, want: "unknown flag --batch-max-duraton; did you mean --batch-max-duration?"},
		{name: "misspelt variable", env: map[string]string{"BATCH_MAX_DURATON": "5s"},
			want: "environment variable BATCH_MAX_DURATON is not a setting; did you mean BATCH_MAX_DURATION? (rename or unset it)"},
		{name: "both ways to set the metrics address", args: []string{"--metrics-port=9090", "--metrics-bind-address=:9000"},
			want: "--metrics-port and --metrics-bind-address both set where to listen: give one"},
		{name: "leader election on and off", args: []string{"--leader-elect=true", "--disable-leader-election"},
			want: "--leader-elect=true and --disable-leader-election=true disagree: give one"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var stderr bytes.Buffer
			_, err := parseControllerFlags(tt.args, &stderr)
			if !errors.Is(err, errBadFlags) || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("err = %v, stderr %q; want errBadFlags and %q", err, stderr.String(), tt.want)
			}
		})
	}
}

// TestSettingsBetweenJoinerFlags: where a Karpenter setting meets one of Joiner's own flags, the
// flag given on the command line wins, and a variable never overrides it.
func TestSettingsBetweenJoinerFlags(t *testing.T) {
	t.Run("metrics bind address wins over METRICS_PORT", func(t *testing.T) {
		t.Setenv("METRICS_PORT", "9090")
		if got := parse(t, "--metrics-bind-address=127.0.0.1:9000").opts.MetricsAddr; got != "127.0.0.1:9000" {
			t.Errorf("metrics address %q", got)
		}
	})
	t.Run("--leader-elect wins over DISABLE_LEADER_ELECTION", func(t *testing.T) {
		t.Setenv("DISABLE_LEADER_ELECTION", "true")
		if !parse(t, "--leader-elect=true").opts.LeaderElect {
			t.Error("leader election off")
		}
	})
	t.Run("--consolidation-workers wins over CPU_REQUESTS", func(t *testing.T) {
		t.Setenv("CPU_REQUESTS", "4000")
		if got := parse(t, "--consolidation-workers=2").opts.Controllers.Disruption.Planner.Workers; got != 2 {
			t.Errorf("workers %d", got)
		}
	})
	t.Run("a service link variable of another name is left alone", func(t *testing.T) {
		t.Setenv("METRIC_PORT", "tcp://10.96.0.7:8080")
		parse(t)
	})
}

// TestPrintSettings: --print-settings lists every setting with its variable, value and source,
// and every gate, then exits as --help does.
func TestPrintSettings(t *testing.T) {
	t.Setenv("BATCH_IDLE_DURATION", "2s")
	var out bytes.Buffer
	_, err := parseControllerFlags([]string{"--print-settings", "--batch-max-duration=20s", "--feature-gates=NodeRepair=true"}, &out)
	if !errors.Is(err, flag.ErrHelp) || flagExit(err) != 0 {
		t.Fatalf("err = %v, want flag.ErrHelp (exit 0)", err)
	}
	for _, want := range []string{
		"setting\t--batch-max-duration\tBATCH_MAX_DURATION\t20s\t--batch-max-duration\tsupported: controllers.Options.Provisioning.BatchMaxDuration\n",
		"setting\t--batch-idle-duration\tBATCH_IDLE_DURATION\t2s\tBATCH_IDLE_DURATION\tsupported: controllers.Options.Provisioning.BatchIdle\n",
		"setting\t--preference-policy\tPREFERENCE_POLICY\tRespect\tdefault\t",
		"gate\tNodeRepair\tFEATURE_GATES\ttrue\t--feature-gates\tsupported: controllers.Options.NodeRepair: node repair deletes the NodeClaim of a Node",
		"gate\tReservedCapacity\tFEATURE_GATES\ttrue\tdefault\t",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), "\nsetting\t"); n != len(settingsTable) {
		t.Errorf("%d settings printed, want %d", n, len(settingsTable))
	}
}
