package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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
	folder := t.TempDir()
	if err := os.WriteFile(filepath.Join(folder, "np.yaml"), []byte(nodePool("  limits: {cpu: \"10\"}\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(folder, "pipe.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
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
		{name: "policy check needs policies", args: []string{"policy", "check", "-f", "-"}, wantCode: 2, wantStderr: "--policies is required"},
		{name: "policy check deny", args: []string{"policy", "check", "--policies", policies, "-f", "-"}, stdin: nodePool(""),
			wantCode: 1, wantStdout: "deny [needs-limit] set spec.limits.cpu (field: spec.limits.cpu)"},
		{name: "policy check clean", args: []string{"policy", "check", "--policies", policies, "-f", "-"}, stdin: nodePool("  limits: {cpu: \"10\"}\n"),
			wantCode: 0, wantStdout: "1 allowed, 0 denied"},
		{name: "policy check json", args: []string{"policy", "check", "--policies", policies, "-o", "json", "-f", "-"}, stdin: nodePool(""),
			wantCode: 1, wantStdout: `"policy": "needs-limit"`},
		{name: "policy check help lists the input flags", args: []string{"policy", "check", "--help"},
			wantStderr: "size limit of each input file and of standard input, such as 64Mi, 512Ki or 1Gi (default 64MiB)"},
		{name: "policy check over max-file-size", args: []string{"policy", "check", "--policies", policies, "--max-file-size", "400", "-f", "-"}, stdin: nodePool("") + "# " + strings.Repeat("x", 400) + "\n",
			wantCode: 2, wantStderr: "joiner policy check: load objects: read standard input: it holds more than 400B, over the limit of 400B on one input file; if it is meant to be read, raise the limit with --max-file-size"},
		{name: "policy check max-file-size with a unit", args: []string{"policy", "check", "--policies", policies, "--max-file-size=10Mi", "-f", "-"}, stdin: nodePool(""),
			wantCode: 1, wantStdout: "deny [needs-limit]"},
		{name: "policy check bad max-file-size", args: []string{"policy", "check", "--policies", policies, "--max-file-size", "10Mx", "-f", "-"},
			wantCode: 2, wantStderr: `invalid value "10Mx" for flag -max-file-size: size "10Mx": unknown unit "Mx"`},
		{name: "policy check no objects", args: []string{"policy", "check", "--policies", policies, "-f", "-"}, stdin: "# only a comment\n",
			wantCode: 2, wantStderr: "no Kubernetes objects found in standard input (holds none); check the paths given, or pass --allow-empty"},
		{name: "policy check no objects allowed", args: []string{"policy", "check", "--policies", policies, "--allow-empty", "-f", "-"}, stdin: "# only a comment\n",
			wantCode: 0, wantStdout: "checked 0 objects against 1 policies"},
		{name: "policy check skips a FIFO in a folder", args: []string{"policy", "check", "--policies", policies, "-f", folder},
			wantCode: 0, wantStdout: "checked 1 objects", wantStderr: "warning: skipped " + fifo + ": a named pipe (FIFO)"},
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

// TestPolicyCheckStopsWhenInterrupted: Ctrl-C or SIGTERM (which cancel the command's context, see main)
// stop `joiner policy check` while it waits for standard input that never ends.
func TestPolicyCheckStopsWhenInterrupted(t *testing.T) {
	policies := filepath.Join(t.TempDir(), "policies.yaml")
	if err := os.WriteFile(policies, []byte("apiVersion: joiner.dev/v1alpha1\nkind: ProvisioningPolicy\nmetadata: {name: p}\nspec:\n  rego: |\n    package p\n    violation contains {\"msg\": \"x\"} if { false }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stdin, w := io.Pipe()
	defer func() { _ = w.Close() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"policy", "check", "--policies", policies, "-f", "-"}, stdin, io.Discard, &stderr)
	}()
	// io.Pipe's Write returns once the command has read the bytes: it is reading standard input.
	if _, err := io.WriteString(w, "apiVersion: v1\n"); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case code := <-done:
		if code != 2 || !strings.Contains(stderr.String(), "joiner policy check: load objects: read standard input: stopped: context canceled") {
			t.Fatalf("exit code %d, stderr %q; want 2 (an input error) and the read reported as stopped", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("joiner policy check still running 10s after its context was cancelled")
	}
}
