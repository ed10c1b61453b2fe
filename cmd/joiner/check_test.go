package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/testsupport/filestest"
)

// needsLimitPolicy denies a NodePool without spec.limits.cpu.
const needsLimitPolicy = `apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata: {name: needs-limit}
spec:
  match: {kinds: [NodePool]}
  rego: |
    package needslimit
    violation contains {"msg": "set spec.limits.cpu", "field": "spec.limits.cpu"} if {
      not input.review.object.spec.limits.cpu
    }
`

func TestRunCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	policies := write("policies.yaml", needsLimitPolicy)
	nodePool := func(specExtra string) string {
		return "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n" + specExtra +
			"  template:\n    spec:\n      nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: default}\n      requirements: []\n" +
			"---\napiVersion: joiner.dev/v1alpha1\nkind: LocalNodeClass\nmetadata: {name: default}\n"
	}
	live := write("live.yaml", nodePool("  limits: {cpu: \"10\"}\n"))
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout []string
		wantStderr string
	}{
		{name: "help", args: []string{"check", "--help"}, wantStderr: "Gives each manifest the verdict a cluster running Joiner would give it"},
		{name: "admitted", args: []string{"check", "-f", "-"}, stdin: nodePool("  limits: {cpu: \"10\"}\n"),
			wantStdout: []string{"checked 2 objects against 0 policies: 2 allowed, 0 denied, 0 skipped, 0 warnings"}},
		{name: "the schema refuses", args: []string{"check", "-f", "-"}, stdin: nodePool("  weight: 0\n"), wantCode: 1,
			wantStdout: []string{"-#1 NodePool/np: deny spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1"}},
		{name: "a policy refuses", args: []string{"check", "--policies", policies, "-f", "-"}, stdin: nodePool(""), wantCode: 1,
			wantStdout: []string{"-#1 NodePool/np: deny [needs-limit] set spec.limits.cpu (field: spec.limits.cpu)"}},
		{name: "json", args: []string{"check", "-o", "json", "-f", "-"}, stdin: nodePool("  weight: 0\n"), wantCode: 1,
			wantStdout: []string{`"error": "NodePool.karpenter.sh \"np\" is invalid: spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1"`, `"field": "spec.weight"`}},
		{name: "an update against the live revision", args: []string{"check", "--old", live, "-f", "-"},
			stdin: strings.Replace(nodePool("  limits: {cpu: \"10\"}\n"), "kind: LocalNodeClass, name: default}", "kind: OtherClass, name: default}", 1), wantCode: 1,
			wantStdout: []string{"-#1 NodePool/np: deny spec.template.spec.nodeClassRef: Invalid value: nodeClassRef.kind is immutable"}},
		{name: "a legacy kind", args: []string{"check", "-f", "-"}, stdin: "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: p}\n", wantCode: 1,
			wantStdout: []string{"-#1 Provisioner/p: error karpenter.sh/v1alpha5 Provisioner is not served; run `joiner convert`"}},
		{name: "unknown kinds skipped", args: []string{"check", "-f", "-"}, stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			wantStdout: []string{"checked 1 objects against 0 policies: 0 allowed, 0 denied, 1 skipped, 0 warnings"}},
		{name: "--skip-unknown-kinds is a deprecated no-op", args: []string{"check", "--skip-unknown-kinds", "-f", "-"}, stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			wantStdout: []string{"1 skipped"}, wantStderr: "note: --skip-unknown-kinds is deprecated and has no effect"},
		{name: "unknown kinds with --strict-kinds", args: []string{"check", "--strict-kinds", "-f", "-"}, stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", wantCode: 1,
			wantStdout: []string{"-#1 ConfigMap/c: error v1 ConfigMap is not a kind Joiner judges"}},
		{name: "--output is -o", args: []string{"check", "--output", "github", "-f", "-"}, stdin: nodePool("  weight: 0\n"), wantCode: 1,
			wantStdout: []string{"::error file=-,line=1,title=NodePool/np apiserver::spec.weight: Invalid value: 0"}},
		{name: "bad --output", args: []string{"check", "-o", "yaml", "-f", "-"}, wantCode: 2, wantStderr: `output "yaml" is not supported; use human, json, junit, sarif, github, gitlab`},
		{name: "help documents the exit codes", args: []string{"check", "--help"}, wantStderr: "2  usage or input error"},
		{name: "unknown fields warned", args: []string{"check", "--validate", "warn", "-f", "-"}, stdin: nodePool("  limits: {cpu: \"10\"}\n  colour: blue\n"),
			wantStdout: []string{`-#1 NodePool/np: warn unknown field "spec.colour"`}},
		{name: "bad --validate", args: []string{"check", "--validate", "loose", "-f", "-"}, wantCode: 2, wantStderr: `--validate "loose" is not supported; use strict, warn or ignore`},
		{name: "no manifests", args: []string{"check"}, wantCode: 2, wantStderr: "joiner check: no manifests to check"},
		{name: "policy check needs --policies", args: []string{"policy", "check", "-f", "-"}, wantCode: 2, wantStderr: "joiner policy check: --policies is required"},
		{name: "policy check still runs the policies alone", args: []string{"policy", "check", "--policies", policies, "-f", "-"}, stdin: nodePool("  weight: 0\n"), wantCode: 1,
			wantStdout: []string{"-#1 NodePool/np: deny [needs-limit] set spec.limits.cpu (field: spec.limits.cpu)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout.String())
				}
			}
			if tt.wantStderr != "" && !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr.String())
			}
		})
	}
}

// TestPolicyCheckIsCheckPolicyOnly: `joiner policy check` is `joiner check --policy-only`, with the same
// report in every format, the same refusal of legacy kinds and the same handling of foreign kinds.
func TestPolicyCheckIsCheckPolicyOnly(t *testing.T) {
	dir := filestest.Tree(t, map[string]string{
		"policies.yaml": needsLimitPolicy,
		"m/pools.yaml": "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n  weight: 0\n  template:\n    spec:\n" +
			"      nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: default}\n      requirements: []\n",
		"legacy/seed.yaml": "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: default}\nspec: {ttlSecondsAfterEmpty: 30}\n" +
			"---\napiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplate\nmetadata: {name: default}\n",
		"other/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n",
	})
	policies := filepath.Join(dir, "policies.yaml")
	run1 := func(args ...string) (string, int) {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, strings.NewReader(""), &stdout, &stderr)
		return stdout.String() + stderr.String(), code
	}
	tests := []struct {
		name     string
		folder   string
		extra    []string
		wantCode int
		want     []string
	}{
		{name: "a policy denies; the schema is not checked", folder: "m", wantCode: 1,
			want: []string{"NodePool/np: deny [needs-limit] set spec.limits.cpu (field: spec.limits.cpu)", "1 denied"}},
		{name: "json", folder: "m", extra: []string{"-o", "json"}, wantCode: 1, want: []string{`"policy": "needs-limit"`}},
		{name: "sarif", folder: "m", extra: []string{"-o", "sarif"}, wantCode: 1, want: []string{`"ruleId": "needs-limit"`}},
		{name: "legacy kinds are refused with the convert hint", folder: "legacy", wantCode: 1, want: []string{
			"Provisioner/default: error karpenter.sh/v1alpha5 Provisioner is not served; run `joiner convert`",
			"AWSNodeTemplate/default: error karpenter.k8s.aws/v1alpha1 AWSNodeTemplate is not served; run `joiner convert`",
		}},
		{name: "foreign kinds are skipped", folder: "other", want: []string{"0 denied, 1 skipped"}},
		{name: "foreign kinds with --strict-kinds", folder: "other", extra: []string{"--strict-kinds"}, wantCode: 1,
			want: []string{"ConfigMap/settings: error v1 ConfigMap is not a kind Joiner judges"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--policies", policies, "-f", filepath.Join(dir, tt.folder)}, tt.extra...)
			alias, aliasCode := run1(append([]string{"policy", "check"}, args...)...)
			check, checkCode := run1(append([]string{"check", "--policy-only"}, args...)...)
			if alias != check || aliasCode != checkCode {
				t.Fatalf("joiner policy check (exit %d):\n%s\njoiner check --policy-only (exit %d):\n%s", aliasCode, alias, checkCode, check)
			}
			if checkCode != tt.wantCode {
				t.Errorf("exit code %d, want %d\n%s", checkCode, tt.wantCode, check)
			}
			for _, w := range tt.want {
				if !strings.Contains(check, w) {
					t.Errorf("report lacks %q:\n%s", w, check)
				}
			}
		})
	}
	// The full check refuses the legacy seed the same way.
	if out, code := run1("check", "-f", filepath.Join(dir, "legacy")); code != 1 || !strings.Contains(out, "run `joiner convert`") {
		t.Errorf("joiner check on the legacy seed: exit %d\n%s", code, out)
	}
}
