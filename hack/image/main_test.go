package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRunRefusesBadCommandLines: every mistake is reported before anything is built.
func TestRunRefusesBadCommandLines(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string
	}{
		{name: "help", args: []string{"--help"}, wantCode: 0, wantStderr: "Usage: go run ./hack/image"},
		{name: "unknown flag", args: []string{"--push"}, wantCode: 2, wantStderr: "flag provided but not defined: -push"},
		{name: "arguments", args: []string{"extra"}, wantCode: 2, wantStderr: "unexpected arguments [extra]"},
		{name: "platform", args: []string{"--platforms", "linux/amd64,darwin/arm64"}, wantCode: 2, wantStderr: `"darwin/arm64": only linux images are built`},
		{name: "created", args: []string{"--created", "yesterday"}, wantCode: 2, wantStderr: `--created "yesterday": want an RFC 3339 time`},
		{name: "version", args: []string{"--out", t.TempDir(), "--version", "1.0+x"}, wantCode: 1, wantStderr: `--version "1.0+x" is not a valid image tag`},
		{name: "repository", args: []string{"--out", t.TempDir(), "--repository", "Example.com/x:1"}, wantCode: 1, wantStderr: "--repository"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), tt.args, &stdout, &stderr); code != tt.wantCode {
				t.Errorf("exit %d, want %d\n%s", code, tt.wantCode, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr.String())
			}
			if strings.Contains(stderr.String(), "building the binary") {
				t.Error("it started building")
			}
		})
	}
}
