package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLogOutputs: the log goes to every output of --log-output-paths at --log-level ("stdout" and
// "stderr" the process's streams, anything else a file appended to), and an output that cannot be
// opened is an error naming the setting.
func TestLogOutputs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "joiner.log")
	if err := os.WriteFile(file, []byte("earlier line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                   string
		args                   []string
		wantStdout, wantStderr bool
		wantFile, wantDebug    bool
		wantErr                string
	}{
		{name: "Karpenter's default: stdout", wantStdout: true},
		{name: "stderr and a file, debug", args: []string{"--log-output-paths=stderr," + file, "--log-level=debug"}, wantStderr: true, wantFile: true, wantDebug: true},
		{name: "a file that cannot be opened", args: []string{"--log-output-paths=" + filepath.Join(dir, "missing", "joiner.log")},
			wantErr: "--log-output-paths: open " + filepath.Join(dir, "missing", "joiner.log")},
		{name: "an error output that cannot be opened", args: []string{"--log-error-output-paths=" + dir},
			wantErr: "--log-error-output-paths: open " + dir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			log, closeLog, err := parse(t, tt.args...).newLogger(&stdout, &stderr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			log.Info("info line")
			log.V(1).Info("debug line")
			closeLog()
			written, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			for _, out := range []struct {
				name, text string
				want       bool
			}{{"stdout", stdout.String(), tt.wantStdout}, {"stderr", stderr.String(), tt.wantStderr}, {"file", strings.TrimPrefix(string(written), "earlier line\n"), tt.wantFile}} {
				if strings.Contains(out.text, "info line") != out.want {
					t.Errorf("%s has the info line: %v, want %v (%q)", out.name, !out.want, out.want, out.text)
				}
				if out.want && strings.Contains(out.text, "debug line") != tt.wantDebug {
					t.Errorf("%s has the debug line: %v, want %v", out.name, !tt.wantDebug, tt.wantDebug)
				}
			}
			if !strings.HasPrefix(string(written), "earlier line\n") {
				t.Errorf("the log file was not appended to: %q", written)
			}
		})
	}
}
