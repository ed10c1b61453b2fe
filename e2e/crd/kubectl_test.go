package crd_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/joiner-dev/joiner/testbed"
)

// kubectlBinary returns the kubectl the test bed built, or the one on PATH.
func kubectlBinary(t *testing.T) string {
	t.Helper()
	if assets, err := testbed.FindAssets(""); err == nil {
		if p := filepath.Join(assets, "kubectl"); fileExists(p) {
			return p
		}
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("no kubectl: run `make testbed` to build one: %v", err)
	}
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func runKubectl(kubectl string, args ...string) (string, error) {
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", env.KubeconfigPath}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
