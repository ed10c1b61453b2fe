package config_test

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/testbed"
)

// kustomizationFiles are the names kustomize looks for in a folder.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// entryPoints returns every kustomize entry point under config/ (each folder holding a kustomization),
// relative to the repository root, sorted.
func entryPoints(t *testing.T) []string {
	t.Helper()
	var dirs []string
	err := filepath.WalkDir(filepath.Join(repoRoot, "config"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && slices.Contains(kustomizationFiles, d.Name()) {
			rel, err := filepath.Rel(repoRoot, filepath.Dir(p))
			if err != nil {
				return err
			}
			dirs = append(dirs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dirs)
	return dirs
}

// TestEveryEntryPointIsSelfContained renders each entry point: kustomize accepts it (it fails on an object
// reached by two paths, such as a Namespace included twice), it holds at most one Namespace, and every
// namespaced object is in a Namespace the same rendering creates.
func TestEveryEntryPointIsSelfContained(t *testing.T) {
	dirs := entryPoints(t)
	for _, want := range []string{"config/crd", "config/default", "config/manager", "config/namespace", "config/overlays/cert-manager", "config/rbac", "config/webhook"} {
		if !slices.Contains(dirs, want) {
			t.Errorf("entry points %v lack %s", dirs, want)
		}
	}
	for _, dir := range dirs {
		t.Run(dir, func(t *testing.T) {
			m := parse(t, kustomize(t, dir))
			created := map[string]bool{}
			for _, ns := range m.ofKind("Namespace") {
				if created[ns.Name] {
					t.Errorf("Namespace %s is rendered twice", ns.Name)
				}
				created[ns.Name] = true
			}
			for _, o := range m {
				if o.Namespace != "" && !created[o.Namespace] {
					t.Errorf("%s is in namespace %s, which %s does not create: it cannot apply on an empty cluster", o.key(), o.Namespace, dir)
				}
			}
		})
	}
}

// TestEveryEntryPointAppliesOnAnEmptyCluster applies each entry point, as config/README.md says
// (kubectl apply --server-side -k), with strict field validation, to its own empty kube-apiserver: one
// that holds nothing but the prerequisites the README names (cert-manager's CRDs for the cert-manager
// overlay). Every object must be created.
func TestEveryEntryPointAppliesOnAnEmptyCluster(t *testing.T) {
	for _, dir := range entryPoints(t) {
		t.Run(dir, func(t *testing.T) {
			rendered := kustomize(t, dir)
			opts := testbed.Options{}
			if m := parse(t, rendered); slices.ContainsFunc(m, func(o object) bool { return strings.HasPrefix(o.APIVersion, "cert-manager.io/") }) {
				opts.CRDDirs = []string{certManagerCRDs(t)}
			}
			env := testbed.StartForTest(t, opts)
			c := cluster{kubectl: kubectl(t), kubeconfig: env.KubeconfigPath}
			out, stderr, err := c.run(nil, "apply", "--server-side", "--validate=strict", "-k", filepath.Join(repoRoot, dir))
			if err != nil {
				t.Fatalf("kubectl apply --server-side -k %s on an empty cluster: %v\n%s%s", dir, err, out, stderr)
			}
			// Every rendered object now exists.
			if out, stderr, err := c.run(rendered, "get", "-f", "-", "-o", "name"); err != nil {
				t.Errorf("after applying %s: kubectl get: %v\n%s%s", dir, err, out, stderr)
			}
		})
	}
}

// certManagerCRDs is the folder of cert-manager's CRDs in the cert-manager module (in the module cache,
// since go.mod requires it): what installing cert-manager puts in a cluster for the overlay's objects.
func certManagerCRDs(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	if err != nil {
		t.Fatalf("locate the cert-manager module: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
}
