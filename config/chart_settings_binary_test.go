package config_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// printedSetting is one line of `joiner controller --print-settings`.
type printedSetting struct {
	kind, name, env, value, from, effect string
}

// printSettings runs the built binary as the chart's container would run it (its args, its plain
// environment variables and nothing else of this process's environment) with --print-settings,
// and returns the settings by environment variable, the settings by flag, and the gates by name.
func printSettings(t *testing.T, bin string, p controllerPod) (byEnv, byFlag, gates map[string]printedSetting) {
	t.Helper()
	cmd := exec.Command(bin, append(append([]string{}, p.container.Args...), "--print-settings")...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	for k, v := range p.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("joiner %v --print-settings with env %v: %v\n%s", p.container.Args, p.env, err, out.String())
	}
	byEnv, byFlag, gates = map[string]printedSetting{}, map[string]printedSetting{}, map[string]printedSetting{}
	for _, line := range strings.Split(out.String(), "\n") {
		fields := strings.Split(line, "\t")
		if len(fields) != 6 || strings.HasPrefix(line, "#") {
			continue
		}
		s := printedSetting{kind: fields[0], name: fields[1], env: fields[2], value: fields[3], from: fields[4], effect: fields[5]}
		switch s.kind {
		case "setting":
			byEnv[s.env], byFlag[s.name] = s, s
		case "gate":
			gates[s.name] = s
		}
	}
	if len(byEnv) < 34 || len(gates) < 6 {
		t.Fatalf("--print-settings listed %d settings and %d gates:\n%s", len(byEnv), len(gates), out.String())
	}
	return byEnv, byFlag, gates
}

// buildJoiner builds cmd/joiner into a folder of the test.
func buildJoiner(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "joiner")
	build := exec.Command("go", "build", "-o", bin, "./cmd/joiner")
	build.Dir = repoRoot
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/joiner: %v\n%s", err, out)
	}
	return bin
}

// TestChartSettingsReachTheBinary closes the loop of settingCases: each rendering, run through the
// built binary with the container's own args and environment, gives every setting the values set
// the value rendered, from the flag or Karpenter's variable the chart rendered; every variable the
// chart renders is one the binary reads (an unknown one would be ignored, or refused as a
// misspelling), as is every variable the chart may render for a setting (karpenterSettingEnv).
// cmd/joiner's TestSettingsReachTheirOptions takes each setting on to its option.
func TestChartSettingsReachTheBinary(t *testing.T) {
	bin := buildJoiner(t)
	byEnv, _, _ := printSettings(t, bin, controllerOf(t, helmValues(t, "", prodCluster...)))
	for _, name := range karpenterSettingEnv {
		if _, ok := byEnv[name]; !ok {
			t.Errorf("the chart may render %s, which `joiner controller` does not read", name)
		}
	}
	for _, tt := range settingCases {
		t.Run(tt.name, func(t *testing.T) {
			p := controllerOf(t, helmValues(t, tt.values, prodCluster...))
			byEnv, byFlag, gates := printSettings(t, bin, p)
			for name, value := range p.env {
				if _, ok := byEnv[name]; !ok {
					t.Errorf("the chart renders %s=%q, which `joiner controller` does not read", name, value)
				}
			}
			for name, want := range tt.wantEnv {
				if got := byEnv[name]; got.value != want || got.from != name {
					t.Errorf("%s: the binary has %q from %s, want %q from %s", name, got.value, got.from, want, name)
				}
				if name == "FEATURE_GATES" {
					checkGates(t, gates, want)
				}
			}
			for flagName, want := range tt.wantFlags {
				got, ok := byFlag[flagName]
				if !ok {
					continue // one of Joiner's own flags (--metrics-bind-address, ...), not a Karpenter setting
				}
				if got.value != want || got.from != flagName {
					t.Errorf("%s: the binary has %q from %s, want %q from the flag", flagName, got.value, got.from, want)
				}
			}
		})
	}
}

// checkGates: every Name=value of FEATURE_GATES is the gate's value in the binary, from the variable
// (SpotToSpotConsolidation from the --spot-to-spot-consolidation flag the chart renders beside it).
func checkGates(t *testing.T, gates map[string]printedSetting, featureGates string) {
	t.Helper()
	for _, pair := range strings.Split(featureGates, ",") {
		name, value, _ := strings.Cut(pair, "=")
		wantFrom := "FEATURE_GATES"
		if name == "SpotToSpotConsolidation" {
			wantFrom = "--spot-to-spot-consolidation"
		}
		if got := gates[name]; got.value != value || got.from != wantFrom {
			t.Errorf("gate %s: the binary has %q from %s, want %q from %s", name, got.value, got.from, value, wantFrom)
		}
	}
}
