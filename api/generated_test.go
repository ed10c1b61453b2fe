package api_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The API packages whose deepcopy code controller-gen writes.
var apiPackages = []string{"karpenter/v1", "aws/v1", "joiner/v1alpha1", "autoscaling/v1beta1"}

func controllerGen(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"run", "sigs.k8s.io/controller-tools/cmd/controller-gen"}, args...)...)
	cmd.Dir = ".."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("controller-gen %v: %v\n%s", args, err, stderr.String())
	}
	return out
}

// TestCRDsAreCurrent fails when config/crd/bases differs from what the Go types generate.
func TestCRDsAreCurrent(t *testing.T) {
	dir := t.TempDir()
	controllerGen(t, "crd", "paths=./api/...", "output:crd:artifacts:config="+dir)
	fresh, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob(filepath.Join("..", "config", "crd", "bases", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(fresh) != len(committed) {
		t.Errorf("config/crd/bases has %d CRDs, the types generate %d: run `make generate`", len(committed), len(fresh))
	}
	for _, f := range fresh {
		want, _ := os.ReadFile(f)
		got, err := os.ReadFile(filepath.Join("..", "config", "crd", "bases", filepath.Base(f)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("config/crd/bases/%s is stale: run `make generate`", filepath.Base(f))
		}
	}
}

// TestDeepCopyIsCurrent fails when a zz_generated.deepcopy.go differs from what the types generate.
func TestDeepCopyIsCurrent(t *testing.T) {
	for _, pkg := range apiPackages {
		t.Run(pkg, func(t *testing.T) {
			want := controllerGen(t, "object", "paths=./api/"+pkg, "output:object:stdout")
			got, err := os.ReadFile(filepath.Join(pkg, "zz_generated.deepcopy.go"))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(bytes.TrimSpace(got), bytes.TrimSpace(want)) {
				t.Errorf("api/%s/zz_generated.deepcopy.go is stale: run `make generate`", pkg)
			}
		})
	}
}
