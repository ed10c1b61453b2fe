package main

import (
	"bytes"
	"context"
	"runtime"
	"strings"
	"testing"
)

// TestVersionPrintsTheStamps: `joiner version` prints what -ldflags stamped (hack/image sets
// main.version and main.commit), and the defaults of a plain go build.
func TestVersionPrintsTheStamps(t *testing.T) {
	tests := []struct {
		name, version, commit, want string
	}{
		{name: "plain go build", version: "dev", commit: "unknown", want: "joiner dev (commit unknown, "},
		{name: "stamped", version: "0.1.0", commit: "0123abc", want: "joiner 0.1.0 (commit 0123abc, "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			oldVersion, oldCommit := version, commit
			t.Cleanup(func() { version, commit = oldVersion, oldCommit })
			version, commit = tt.version, tt.commit
			for _, arg := range []string{"version", "--version"} {
				var stdout, stderr bytes.Buffer
				if code := run(context.Background(), []string{arg}, strings.NewReader(""), &stdout, &stderr); code != 0 {
					t.Fatalf("%s: exit %d: %s", arg, code, stderr.String())
				}
				want := tt.want + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
				if stdout.String() != want {
					t.Errorf("%s printed %q, want %q", arg, stdout.String(), want)
				}
			}
		})
	}
}
