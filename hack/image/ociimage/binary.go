package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// BinaryOptions say where and how the binary is built.
type BinaryOptions struct {
	// Go is the go command (default "go").
	Go string
	// Dir is the module root go build runs in (default the working directory).
	Dir string
	// Package is the main package (DefaultPackage).
	Package string
}

// LDFlags is the -ldflags value of a build: no symbol table or DWARF (-s -w; `go version -m`
// still reads the module list), and the version and commit stamped into package main, which
// `joiner version` prints and the joiner_build_info metric reports.
func LDFlags(m Metadata) string {
	return fmt.Sprintf("-s -w -X main.version=%s -X main.commit=%s", m.Version, m.Commit)
}

// BuildBinary builds the static binary of o.Package for p into out: CGO_ENABLED=0 (so it needs no
// libc in an empty image) and -trimpath (no local paths in it, so two checkouts build the same
// bytes). m must have passed Validate, which keeps the -ldflags free of spaces.
func BuildBinary(ctx context.Context, o BinaryOptions, p Platform, m Metadata, out string) error {
	args := []string{"build", "-trimpath", "-ldflags", LDFlags(m), "-o", out, orDefault(o.Package, DefaultPackage)}
	cmd := exec.CommandContext(ctx, orDefault(o.Go, "go"), args...)
	cmd.Dir = o.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build the binary for %s (GOOS=%s GOARCH=%s go %s): %w\n%s",
			p, p.OS, p.Architecture, strings.Join(args, " "), err, output.String())
	}
	return nil
}
