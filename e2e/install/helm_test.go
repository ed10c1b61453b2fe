package install_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// chartDir is the chart under test, relative to this package.
var chartDir = filepath.Join("..", "..", "charts", "joiner")

// karpenterValues is a values file as a team writes it for Karpenter v1's chart (the getting-started
// guide's settings and resources, and IRSA), installed unchanged. %[1]s is the cluster name, %[2]s the
// interruption queue, %[3]s the controller's IAM role.
const karpenterValues = `# Karpenter v1 values (karpenter/karpenter chart), as the getting-started guide sets them.
settings:
  clusterName: %[1]s
  interruptionQueue: %[2]s
serviceAccount:
  annotations:
    eks.amazonaws.com/role-arn: %[3]s
controller:
  resources:
    requests:
      cpu: 1
      memory: 1Gi
    limits:
      cpu: 1
      memory: 1Gi
replicas: 2
`

// findHelm returns the helm binary hack/tools/helm.sh builds (cached in .cache/tools after the
// first build), as `make helm` does.
func findHelm() (string, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("bash", filepath.Join("..", "..", "hack", "tools", "helm.sh"))
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/tools/helm.sh: %w\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

// helm runs the helm binary as the cluster's admin (its kubeconfig), with its own configuration
// and cache folders, and returns stdout; it fails t with the output when helm fails.
func helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := tryHelm(args...)
	if err != nil {
		t.Fatalf("helm %s: %v", strings.Join(args, " "), err)
	}
	return out
}

func tryHelm(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(tools.helm, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+helmKubeconfig,
		"HELM_CONFIG_HOME="+filepath.Join(workDir, "helm", "config"), "HELM_CACHE_HOME="+filepath.Join(workDir, "helm", "cache"),
		"HELM_DATA_HOME="+filepath.Join(workDir, "helm", "data"))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("%w\n%s%s", err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// helmKubeconfig is the kubeconfig helm runs with: a cluster-admin's token, through the apiserver's
// front.
var helmKubeconfig string

// writeHelmKubeconfig writes helmKubeconfig.
func writeHelmKubeconfig(ctx context.Context) error {
	token, err := adminToken(ctx)
	if err != nil {
		return err
	}
	helmKubeconfig = filepath.Join(workDir, "helm-kubeconfig")
	return writeTokenKubeconfig(helmKubeconfig, front.url, front.caPEM, "e2e-helm-user", "default", token)
}

// writeValues writes the Karpenter values file of the seeded account and returns its path.
func writeValues() (string, error) {
	path := filepath.Join(workDir, "karpenter-values.yaml")
	values := fmt.Sprintf(karpenterValues, account.ClusterName, account.QueueName, controllerRoleARN)
	if err := os.WriteFile(path, []byte(values), 0o600); err != nil {
		return "", fmt.Errorf("write values: %w", err)
	}
	return path, nil
}

// releaseObjects returns the objects of the release's manifest and hooks, as helm recorded them.
func releaseObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var objs []*unstructured.Unstructured
	for _, what := range []string{"manifest", "hooks"} {
		out := helm(t, "get", what, releaseName, "--namespace", namespace)
		dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
		for {
			u := &unstructured.Unstructured{}
			err := dec.Decode(&u.Object)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("parse helm get %s: %v", what, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if u.GetNamespace() == "" && namespaced(u.GetKind()) {
				u.SetNamespace(namespace)
			}
			objs = append(objs, u)
		}
	}
	return objs
}

// namespaced reports whether the chart's objects of kind live in a namespace.
func namespaced(kind string) bool {
	switch kind {
	case "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
		"CustomResourceDefinition", "Namespace", "PriorityClass":
		return false
	}
	return true
}
