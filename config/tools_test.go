package config_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/joiner-dev/joiner/testbed"
)

// repoRoot is the repository root; go test runs in the package directory, config/.
const repoRoot = ".."

// kubectl returns the kubectl of the test bed (built by `make testbed`, found like the test bed finds
// its binaries: $JOINER_TESTBED_ASSETS, then .cache/testbed/current above the working directory), or
// the kubectl on PATH.
func kubectl(t testing.TB) string {
	t.Helper()
	if dir, err := testbed.FindAssets(""); err == nil {
		if p := filepath.Join(dir, "kubectl"); isExecutable(p) {
			return p
		}
	}
	p, err := exec.LookPath("kubectl")
	if err != nil {
		t.Fatalf("no kubectl: run `make testbed` (builds .cache/testbed/current/kubectl), set %s, or put kubectl on PATH", testbed.AssetsEnv)
	}
	return p
}

func isExecutable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns a helm binary built from Go modules by hack/tools/helm.sh (cached after the first build).
func helm(t testing.TB) string {
	t.Helper()
	helmOnce.Do(func() {
		var stderr bytes.Buffer
		cmd := exec.Command("bash", filepath.Join(repoRoot, "hack", "tools", "helm.sh"))
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("hack/tools/helm.sh: %w\n%s", err, stderr.String())
			return
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		helmPath = lines[len(lines)-1]
		if !isExecutable(helmPath) {
			helmErr = fmt.Errorf("hack/tools/helm.sh printed %q, which is not an executable", helmPath)
		}
	})
	if helmErr != nil {
		t.Fatalf("cannot build helm: %v", helmErr)
	}
	return helmPath
}

// run runs a command and returns its stdout; it fails t with stderr when the command fails.
func run(t testing.TB, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	out, stderr, err := tryRun(stdin, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, stderr)
	}
	return out
}

// tryRun runs a command and returns stdout, stderr and the error.
func tryRun(stdin []byte, name string, args ...string) ([]byte, string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.Bytes(), stderr.String(), err
}

// kustomize renders a kustomization directory (relative to the repository root).
func kustomize(t testing.TB, dir string) []byte {
	t.Helper()
	return run(t, nil, kubectl(t), "kustomize", filepath.Join(repoRoot, dir))
}

// helmTemplate renders charts/joiner into namespace ns with the local provider (the kustomize
// tree's; the chart has no default provider) and then the given flags, which may choose another.
func helmTemplate(t testing.TB, ns string, extra ...string) []byte {
	t.Helper()
	out, stderr, err := tryHelmTemplate(t, ns, append([]string{"--set", "settings.cloudProvider=local"}, extra...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", extra, err, stderr)
	}
	return out
}

// tryHelmTemplate renders charts/joiner into namespace ns with exactly the given flags.
func tryHelmTemplate(t testing.TB, ns string, extra ...string) ([]byte, string, error) {
	t.Helper()
	args := append([]string{"template", "joiner", filepath.Join(repoRoot, "charts", "joiner"), "--namespace", ns}, extra...)
	return tryRun(nil, helm(t), args...)
}

// object is one rendered Kubernetes object.
type object struct {
	APIVersion string
	Kind       string
	Name       string
	Namespace  string
	// Fields is the object as generic JSON, for comparisons.
	Fields map[string]any
	// JSON is the object as JSON, for strict decoding into typed structs.
	JSON []byte
}

func (o object) key() string { return o.Kind + "/" + o.Namespace + "/" + o.Name }

func (o object) annotations() map[string]any {
	md, _ := o.Fields["metadata"].(map[string]any)
	a, _ := md["annotations"].(map[string]any)
	return a
}

// manifest is a rendered multi-document YAML stream.
type manifest []object

// parse splits a YAML stream into objects; empty documents are skipped.
func parse(t testing.TB, data []byte) manifest {
	t.Helper()
	var m manifest
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read YAML document: %v", err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("YAML document is not valid: %v\n%s", err, doc)
		}
		if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
			continue
		}
		var fields map[string]any
		if err := json.Unmarshal(js, &fields); err != nil {
			t.Fatalf("YAML document is not an object: %v\n%s", err, doc)
		}
		md, _ := fields["metadata"].(map[string]any)
		o := object{Fields: fields, JSON: js}
		o.APIVersion, _ = fields["apiVersion"].(string)
		o.Kind, _ = fields["kind"].(string)
		o.Name, _ = md["name"].(string)
		o.Namespace, _ = md["namespace"].(string)
		if o.Kind == "" || o.Name == "" {
			t.Fatalf("document without kind or name:\n%s", doc)
		}
		m = append(m, o)
	}
	if len(m) == 0 {
		t.Fatal("the rendering is empty")
	}
	return m
}

// get returns the one object of kind with name, failing t when there is none.
func (m manifest) get(t testing.TB, kind, name string) object {
	t.Helper()
	var found []object
	for _, o := range m {
		if o.Kind == kind && o.Name == name {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want exactly one %s %q in the rendering, found %d", kind, name, len(found))
	}
	return found[0]
}

func (m manifest) has(kind, name string) bool {
	for _, o := range m {
		if o.Kind == kind && o.Name == name {
			return true
		}
	}
	return false
}

func (m manifest) ofKind(kind string) manifest {
	var out manifest
	for _, o := range m {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

// decode strictly decodes o into a typed API struct: a misspelled or misplaced field fails the test.
func decode(t testing.TB, o object, into any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(o.JSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("%s does not decode strictly into %T: %v", o.key(), into, err)
	}
}
