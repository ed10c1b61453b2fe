package testbed

import (
	"fmt"
	"os"
	"path/filepath"
)

// AssetsEnv names the environment variable that points at the test-bed binaries.
const AssetsEnv = "JOINER_TESTBED_ASSETS"

// FindAssets returns the directory holding the control-plane binaries: dir when set, then
// $JOINER_TESTBED_ASSETS, then $KUBEBUILDER_ASSETS, then .cache/testbed/current in the
// nearest parent of the working directory that has one (where `make testbed` puts them).
func FindAssets(dir string) (string, error) {
	for _, d := range []string{dir, os.Getenv(AssetsEnv), os.Getenv("KUBEBUILDER_ASSETS")} {
		if d != "" {
			return filepath.Abs(d)
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find test bed binaries: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		cand := filepath.Join(d, ".cache", "testbed", "current")
		if fi, err := os.Stat(cand); err == nil && fi.IsDir() {
			return filepath.EvalSymlinks(cand)
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("no test bed binaries found: run `make testbed` to build them, or set %s", AssetsEnv)
}

// wrapWithParentDeath writes, for each named binary, a small script into dir that runs the real
// binary from assets so that it is killed when the process that started it dies (setpriv
// --pdeathsig). envtest starts these binaries itself, so this is how a crashed or timed-out
// test run leaves no etcd or apiserver behind. Without setpriv the binaries are linked as they are.
func wrapWithParentDeath(dir, assets string, names ...string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create wrapper directory: %w", err)
	}
	setpriv, _ := lookPath("setpriv")
	for _, n := range names {
		real := filepath.Join(assets, n)
		target := filepath.Join(dir, n)
		if setpriv == "" {
			if err := os.Symlink(real, target); err != nil {
				return "", fmt.Errorf("link %s: %w", n, err)
			}
			continue
		}
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, real)
		if err := os.WriteFile(target, []byte(script), 0o755); err != nil {
			return "", fmt.Errorf("write wrapper for %s: %w", n, err)
		}
	}
	return dir, nil
}
