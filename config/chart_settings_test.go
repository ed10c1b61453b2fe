package config_test

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
)

// karpenterSettingEnv lists the environment variables (Karpenter's names) the chart renders for
// Karpenter's settings: none of them may appear when no setting is given. The binary reads each
// (TestChartSettingsReachTheBinary).
var karpenterSettingEnv = []string{
	"CLUSTER_CA_BUNDLE", "BATCH_MAX_DURATION", "BATCH_IDLE_DURATION", "PREFERENCE_POLICY", "MIN_VALUES_POLICY",
	"ISOLATED_VPC", "EKS_CONTROL_PLANE", "ENABLE_ZONAL_SHIFT", "DISABLE_DRY_RUN", "DISABLE_CLUSTER_STATE_OBSERVABILITY",
	"IGNORE_DRA_REQUESTS", "AMI_REFRESH_INTERVAL", "SUBNET_REFRESH_INTERVAL", "LOG_OUTPUT_PATHS", "LOG_ERROR_OUTPUT_PATHS",
	"FEATURE_GATES",
}

// prodCluster names the cluster on the command line, so that a values file may hold its own settings map.
var prodCluster = []string{"--set", "settings.clusterName=prod"}

// settingCases: each Karpenter setting, as a values file sets it, and the flag or environment
// variable (Karpenter's name) it must reach. prodCluster is added to every case (aws provider).
var settingCases = []struct {
	name, values string
	wantFlags    map[string]string
	wantEnv      map[string]string
}{
	{name: "defaults: the binary's own", values: "",
		wantFlags: map[string]string{"--cloud-provider": "aws", "--cluster-name": "prod", "--vm-memory-overhead-percent": "0.075", "--reserved-enis": "0", "--log-level": "info"}},
	{name: "clusterEndpoint", values: "settings: {clusterEndpoint: 'https://ABC.gr7.us-east-1.eks.amazonaws.com'}",
		wantFlags: map[string]string{"--cluster-endpoint": "https://ABC.gr7.us-east-1.eks.amazonaws.com"}},
	{name: "interruptionQueue", values: "settings: {interruptionQueue: prod-queue}", wantFlags: map[string]string{"--interruption-queue": "prod-queue"}},
	{name: "vmMemoryOverheadPercent", values: "settings: {vmMemoryOverheadPercent: 0.1}", wantFlags: map[string]string{"--vm-memory-overhead-percent": "0.1"}},
	{name: "reservedENIs as Karpenter's string", values: `settings: {reservedENIs: "2"}`, wantFlags: map[string]string{"--reserved-enis": "2"}},
	{name: "reservedENIs as a number", values: "settings: {reservedENIs: 1}", wantFlags: map[string]string{"--reserved-enis": "1"}},
	{name: "logLevel", values: "logLevel: debug", wantFlags: map[string]string{"--log-level": "debug"}},
	{name: "controller.metrics.port", values: "controller: {metrics: {port: 9000}}", wantFlags: map[string]string{"--metrics-bind-address": ":9000"}},
	{name: "controller.healthProbe.port", values: "controller: {healthProbe: {port: 9001}}", wantFlags: map[string]string{"--health-probe-bind-address": ":9001"}},
	{name: "clusterCABundle", values: "settings: {clusterCABundle: LS0tLS1CRUdJTg==}", wantEnv: map[string]string{"CLUSTER_CA_BUNDLE": "LS0tLS1CRUdJTg=="}},
	{name: "batchMaxDuration", values: "settings: {batchMaxDuration: 15s}", wantEnv: map[string]string{"BATCH_MAX_DURATION": "15s"}},
	{name: "batchIdleDuration", values: "settings: {batchIdleDuration: 500ms}", wantEnv: map[string]string{"BATCH_IDLE_DURATION": "500ms"}},
	{name: "preferencePolicy", values: "settings: {preferencePolicy: Ignore}", wantEnv: map[string]string{"PREFERENCE_POLICY": "Ignore"}},
	{name: "minValuesPolicy", values: "settings: {minValuesPolicy: BestEffort}", wantEnv: map[string]string{"MIN_VALUES_POLICY": "BestEffort"}},
	{name: "isolatedVPC", values: "settings: {isolatedVPC: true}", wantEnv: map[string]string{"ISOLATED_VPC": "true"}},
	{name: "eksControlPlane", values: "settings: {eksControlPlane: true}", wantEnv: map[string]string{"EKS_CONTROL_PLANE": "true"}},
	{name: "enableZonalShift", values: "settings: {enableZonalShift: true}", wantEnv: map[string]string{"ENABLE_ZONAL_SHIFT": "true"}},
	{name: "disableDryRun", values: "settings: {disableDryRun: true}", wantEnv: map[string]string{"DISABLE_DRY_RUN": "true"}},
	{name: "disableClusterStateObservability", values: "settings: {disableClusterStateObservability: true}",
		wantEnv: map[string]string{"DISABLE_CLUSTER_STATE_OBSERVABILITY": "true"}},
	{name: "ignoreDRARequests off", values: "settings: {ignoreDRARequests: false}", wantEnv: map[string]string{"IGNORE_DRA_REQUESTS": "false"}},
	{name: "amiRefreshInterval", values: "settings: {amiRefreshInterval: 5m}", wantEnv: map[string]string{"AMI_REFRESH_INTERVAL": "5m"}},
	{name: "subnetRefreshInterval", values: "settings: {subnetRefreshInterval: 2m}", wantEnv: map[string]string{"SUBNET_REFRESH_INTERVAL": "2m"}},
	{name: "logOutputPaths", values: "logOutputPaths: [stdout, /var/log/joiner.log]", wantEnv: map[string]string{"LOG_OUTPUT_PATHS": "stdout,/var/log/joiner.log"}},
	{name: "logErrorOutputPaths", values: "logErrorOutputPaths: [stderr]", wantEnv: map[string]string{"LOG_ERROR_OUTPUT_PATHS": "stderr"}},
	{name: "one feature gate", values: "settings: {featureGates: {spotToSpotConsolidation: false}}",
		wantFlags: map[string]string{"--spot-to-spot-consolidation": "false"},
		wantEnv:   map[string]string{"FEATURE_GATES": "SpotToSpotConsolidation=false"}},
	{name: "every feature gate, in Karpenter's order", values: `
settings:
  featureGates:
    capacityBuffer: true
    staticCapacity: true
    nodeOverlay: true
    spotToSpotConsolidation: true
    reservedCapacity: false
    nodeRepair: true`,
		wantFlags: map[string]string{"--spot-to-spot-consolidation": "true"},
		wantEnv: map[string]string{"FEATURE_GATES": "NodeRepair=true,ReservedCapacity=false,SpotToSpotConsolidation=true," +
			"NodeOverlay=true,StaticCapacity=true,CapacityBuffer=true"}},
}

// TestHelmSettingsReachTheController: every Karpenter setting in the values reaches the controller
// as its flag or as Karpenter's environment variable, and nothing else changes: a setting left out
// renders nothing, so the binary's default (Karpenter's) applies.
func TestHelmSettingsReachTheController(t *testing.T) {
	for _, tt := range settingCases {
		t.Run(tt.name, func(t *testing.T) {
			p := controllerOf(t, helmValues(t, tt.values, prodCluster...))
			for k, want := range tt.wantFlags {
				if got, ok := p.flags[k]; !ok || got != want {
					t.Errorf("flag %s = %q (present %v), want %q; args %v", k, got, ok, want, p.container.Args)
				}
			}
			for _, name := range karpenterSettingEnv {
				got, ok := p.env[name]
				want, wantOK := tt.wantEnv[name]
				if ok != wantOK || got != want {
					t.Errorf("env %s = %q (present %v), want %q (present %v)", name, got, ok, want, wantOK)
				}
			}
			if _, ok := p.flags["--spot-to-spot-consolidation"]; ok && tt.wantFlags["--spot-to-spot-consolidation"] == "" {
				t.Errorf("--spot-to-spot-consolidation rendered though the values set no gate: args %v", p.container.Args)
			}
		})
	}
}

// TestHelmRendersOnlyFlagsTheBinaryHas: every flag any rendering above passes to `joiner controller`
// is one the binary defines (its -h output), so a chart value can never crash-loop the controller
// with "flag provided but not defined".
func TestHelmRendersOnlyFlagsTheBinaryHas(t *testing.T) {
	defined := controllerFlagNames(t)
	rendered := map[string]string{} // flag → the case that rendered it
	for _, tt := range settingCases {
		for f := range controllerOf(t, helmValues(t, tt.values, prodCluster...)).flags {
			rendered[f] = tt.name
		}
	}
	for _, v := range []string{"settings: {cloudProvider: local}", "settings: {clusterName: prod}\ncertManager: {enabled: true}"} {
		for f := range controllerOf(t, helmValues(t, v)).flags {
			rendered[f] = v
		}
	}
	names := make([]string, 0, len(rendered))
	for f := range rendered {
		names = append(names, f)
	}
	sort.Strings(names)
	if len(names) < 10 {
		t.Fatalf("only %d flags rendered (%v): the renderings above are not what this test expects", len(names), names)
	}
	for _, f := range names {
		if !defined[strings.TrimPrefix(f, "--")] {
			t.Errorf("the chart renders %s (case %q), which `joiner controller` does not define", f, rendered[f])
		}
	}
}

var (
	joinerOnce  sync.Once
	joinerFlags map[string]bool
	joinerErr   error
)

// controllerFlagNames builds cmd/joiner and returns the flag names `joiner controller -h` lists.
func controllerFlagNames(t *testing.T) map[string]bool {
	t.Helper()
	joinerOnce.Do(func() {
		bin := filepath.Join(t.TempDir(), "joiner")
		build := exec.Command("go", "build", "-o", bin, "./cmd/joiner")
		build.Dir = repoRoot
		if out, err := build.CombinedOutput(); err != nil {
			joinerErr = fmt.Errorf("go build ./cmd/joiner: %w\n%s", err, out)
			return
		}
		var stderr bytes.Buffer
		help := exec.Command(bin, "controller", "-h")
		help.Stderr, help.Stdout = &stderr, &stderr
		_ = help.Run() // -h exits non-zero by the flag package's convention; the usage is what counts
		joinerFlags = map[string]bool{}
		for _, m := range regexp.MustCompile(`(?m)^\s+-([a-z0-9-]+)`).FindAllStringSubmatch(stderr.String(), -1) {
			joinerFlags[m[1]] = true
		}
		if len(joinerFlags) == 0 {
			joinerErr = fmt.Errorf("`joiner controller -h` listed no flags:\n%s", stderr.String())
		}
	})
	if joinerErr != nil {
		t.Fatal(joinerErr)
	}
	return joinerFlags
}
