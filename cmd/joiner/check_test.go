package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
	policies := write("policies.yaml", `apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata: {name: needs-limit}
spec:
  match: {kinds: [NodePool]}
  rego: |
    package needslimit
    violation contains {"msg": "set spec.limits.cpu", "field": "spec.limits.cpu"} if {
      not input.review.object.spec.limits.cpu
    }
`)
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
		{name: "unknown kinds skipped", args: []string{"check", "--skip-unknown-kinds", "-f", "-"}, stdin: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			wantStdout: []string{"checked 1 objects against 0 policies: 0 allowed, 0 denied, 1 skipped, 0 warnings"}},
		{name: "unknown fields warned", args: []string{"check", "--validate", "warn", "-f", "-"}, stdin: nodePool("  limits: {cpu: \"10\"}\n  colour: blue\n"),
			wantStdout: []string{`-#1 NodePool/np: warn unknown field "spec.colour"`}},
		{name: "bad --validate", args: []string{"check", "--validate", "loose", "-f", "-"}, wantCode: 2, wantStderr: `--validate "loose" is not supported; use strict, warn or ignore`},
		{name: "no manifests", args: []string{"check"}, wantCode: 1, wantStderr: "joiner check: no manifests to check"},
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
