package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	dir := t.TempDir()
	policies := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(policies, []byte(`apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata: {name: needs-limit}
spec:
  match: {kinds: [NodePool]}
  rego: |
    package needslimit
    violation contains {"msg": "set spec.limits.cpu", "field": "spec.limits.cpu"} if {
      not input.review.object.spec.limits.cpu
    }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	nodePool := func(limits string) string {
		return "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: np}\nspec:\n" + limits +
			"  template:\n    spec:\n      nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: default}\n      requirements: []\n"
	}
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "no command", wantCode: 2, wantStderr: "Usage: joiner"},
		{name: "help", args: []string{"--help"}, wantStdout: "controller"},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 2, wantStderr: `unknown command "frobnicate"`},
		{name: "version", args: []string{"version"}, wantStdout: "joiner dev"},
		{name: "controller help", args: []string{"controller", "--help"}, wantStderr: "-cert-mode"},
		{name: "controller bad tls", args: []string{"controller", "--tls-min-version", "1.0"}, wantCode: 2, wantStderr: "use 1.2 or 1.3"},
		{name: "controller unknown provider", args: []string{"controller", "--cloud-provider", "gcp"}, wantCode: 2, wantStderr: `--cloud-provider "gcp" is not available in this build; use local`},
		{name: "policy help", args: []string{"policy", "--help"}, wantStdout: "check"},
		{name: "policy check needs policies", args: []string{"policy", "check", "-f", "-"}, wantCode: 1, wantStderr: "--policies is required"},
		{name: "policy check deny", args: []string{"policy", "check", "--policies", policies, "-f", "-"}, stdin: nodePool(""),
			wantCode: 1, wantStdout: "deny [needs-limit] set spec.limits.cpu (field: spec.limits.cpu)"},
		{name: "policy check clean", args: []string{"policy", "check", "--policies", policies, "-f", "-"}, stdin: nodePool("  limits: {cpu: \"10\"}\n"),
			wantCode: 0, wantStdout: "0 deny"},
		{name: "policy check json", args: []string{"policy", "check", "--policies", policies, "-o", "json", "-f", "-"}, stdin: nodePool(""),
			wantCode: 1, wantStdout: `"policy": "needs-limit"`},
		{name: "policy test library", args: []string{"policy", "test", "../../policy/library"}, wantStdout: "PASS"},
		{name: "policy test needs a folder", args: []string{"policy", "test"}, wantCode: 1, wantStderr: "exactly one folder"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tt.wantStdout) {
				t.Errorf("stdout lacks %q:\n%s", tt.wantStdout, stdout.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr.String())
			}
		})
	}
}
