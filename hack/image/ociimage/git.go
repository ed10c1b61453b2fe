package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// FromGit fills the Version, Commit and Created that m leaves empty from the git checkout at dir:
// Version is `git describe --tags --always --dirty` without a leading v (the tag v0.1.0 gives the
// image tag 0.1.0, the chart's appVersion), Commit is `git rev-parse HEAD`, Created is HEAD's
// committer date. Where git cannot answer (no git, not a checkout) they stay empty, and
// withDefaults gives FallbackVersion, UnknownCommit and the Unix epoch.
func FromGit(ctx context.Context, dir string, m Metadata) Metadata {
	if m.Version == "" {
		if out, err := git(ctx, dir, "describe", "--tags", "--always", "--dirty"); err == nil {
			m.Version = strings.TrimPrefix(out, "v")
		}
	}
	if m.Commit == "" {
		if out, err := git(ctx, dir, "rev-parse", "HEAD"); err == nil {
			m.Commit = out
		}
	}
	if m.Created.IsZero() {
		if out, err := git(ctx, dir, "log", "-1", "--format=%ct", "HEAD"); err == nil {
			if sec, err := strconv.ParseInt(out, 10, 64); err == nil {
				m.Created = time.Unix(sec, 0).UTC()
			}
		}
	}
	return m
}

// git runs git in dir and returns its trimmed standard output.
func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
