package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRunConvert(t *testing.T) {
	const provisioner = `apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata:
  name: default
spec:
  ttlSecondsAfterEmpty: 30
  providerRef:
    name: default
`
	const nodeTemplate = `apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata:
  name: default
spec:
  launchTemplate: legacy
  subnetSelector:
    karpenter.sh/discovery: demo
`
	const v1 = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: ready}\nspec: {template: {spec: {requirements: [], nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: ready}}}}\n"
	dir := t.TempDir()
	legacy := filepath.Join(dir, "legacy.yaml")
	if err := os.WriteFile(legacy, []byte(provisioner), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "converted")
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{name: "help", args: []string{"convert", "--help"}, wantStderr: []string{"Usage: joiner convert", "expireAfter: Never", "-ami-alias-version", "Exit status"}},
		{name: "listed in the usage", args: []string{"--help"}, wantStdout: []string{"convert        convert legacy Karpenter manifests"}},
		{name: "no input", args: []string{"convert"}, wantCode: 2, wantStderr: []string{"pass the manifests to convert with -f"}},
		{name: "bad flag", args: []string{"convert", "--frobnicate"}, wantCode: 2, wantStderr: []string{"flag provided but not defined: -frobnicate"}},
		{name: "missing file", args: []string{"convert", "-f", filepath.Join(dir, "nope.yaml")}, wantCode: 1, wantStderr: []string{"joiner convert: read ", "nope.yaml"}},
		{
			name: "stdin converts", args: []string{"convert", "-f", "-"}, stdin: provisioner,
			wantStdout: []string{"apiVersion: karpenter.sh/v1\nkind: NodePool", "consolidateAfter: 30s", "expireAfter: Never"},
			wantStderr: []string{"note: standard input:5: Provisioner/default spec.ttlSecondsUntilExpired: not set", "1 objects converted, 0 unchanged; 0 errors, 2 notes"},
		},
		{
			name: "what cannot be converted exits 1", args: []string{"convert", "--role", "NodeRole", "-f", "-"}, stdin: nodeTemplate, wantCode: 1,
			wantStdout: []string{"kind: EC2NodeClass", "role: NodeRole"},
			wantStderr: []string{"error: standard input:6: AWSNodeTemplate/default spec.launchTemplate: left out: v1 has no launchTemplate"},
		},
		{
			name: "v1 passes through", args: []string{"convert", "-f", "-"}, stdin: v1,
			wantStdout: []string{v1}, wantStderr: []string{"0 objects converted, 1 unchanged; 0 errors, 0 notes"},
		},
		{
			name: "ignore defaults", args: []string{"convert", "--ignore-defaults", legacy},
			wantStderr: []string{"1 objects converted, 0 unchanged; 0 errors, 1 notes"},
		},
		{
			name: "to a folder", args: []string{"convert", "-f", legacy, "-o", out},
			wantStderr: []string{"1 objects converted"},
		},
		{
			name: "only comments is no input", args: []string{"convert", "-f", "-"}, stdin: "# nothing here\n", wantCode: 1,
			wantStderr: []string{"joiner convert: no Kubernetes objects found in standard input (holds none); check the paths given, or pass --allow-empty"},
		},
		{
			name: "only comments with --allow-empty", args: []string{"convert", "--allow-empty", "-f", "-"}, stdin: "# nothing here\n",
			wantStdout: []string{"# nothing here"}, wantStderr: []string{"0 objects converted, 0 unchanged"},
		},
		{
			name: "over --max-file-size", args: []string{"convert", "--max-file-size", "100", "-f", legacy}, wantCode: 1,
			wantStderr: []string{"legacy.yaml: it holds 144 bytes (144B), over the limit of 100B on one input file; if it is meant to be read, raise the limit with --max-file-size"},
		},
		{
			name: "not over the input", args: []string{"convert", "-f", legacy, "-o", dir}, wantCode: 1,
			wantStderr: []string{"it is an input; choose an output folder that holds no input"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tt.args, strings.NewReader(tt.stdin), &stdout, &stderr)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, stdout.String(), stderr.String())
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(stdout.String(), want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
				}
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
		})
	}
	got, err := os.ReadFile(filepath.Join(out, "legacy.yaml"))
	if err != nil || !strings.Contains(string(got), "kind: NodePool") {
		t.Errorf("-o wrote %q, %v; want the NodePool in legacy.yaml", got, err)
	}
}
