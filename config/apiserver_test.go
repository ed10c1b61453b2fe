package config_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"

	"github.com/joiner-dev/joiner/testbed"
)

// cluster runs kubectl against a test-bed apiserver.
type cluster struct {
	kubectl    string
	kubeconfig string
}

func (c cluster) run(stdin []byte, args ...string) ([]byte, string, error) {
	return tryRun(stdin, c.kubectl, append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
}

func (c cluster) must(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	out, stderr, err := c.run(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out) + stderr
}

// yamlOf joins objects back into a YAML stream (JSON documents are valid YAML).
func yamlOf(objs manifest) []byte {
	var b bytes.Buffer
	for _, o := range objs {
		b.WriteString("---\n")
		b.Write(o.JSON)
		b.WriteString("\n")
	}
	return b.Bytes()
}

func (m manifest) filter(keep func(object) bool) manifest {
	var out manifest
	for _, o := range m {
		if keep(o) {
			out = append(out, o)
		}
	}
	return out
}

const controllerUser = "system:serviceaccount:joiner-system:joiner"

// TestManifestsOnAPIServer installs config/default into a real kube-apiserver and checks what only
// an apiserver can tell: every object is valid (strict field validation), Joiner's pod passes the
// "restricted" Pod Security Standard, the RBAC grants what the controller needs and nothing it does
// not, and the webhook failure stories: with Joiner down, NodePool edits fail closed while Joiner's
// own service account is exempt, Pods in bound namespaces are still admitted (fail open), and the
// chart's pre-delete hook (run with its own RBAC) removes the webhooks and unblocks the API.
func TestManifestsOnAPIServer(t *testing.T) {
	env := testbed.StartForTest(t, testbed.Options{})
	c := cluster{kubectl: kubectl(t), kubeconfig: env.KubeconfigPath}

	rendered := parse(t, kustomize(t, "config/default"))
	isCRD := func(o object) bool { return o.Kind == "CustomResourceDefinition" }
	c.must(t, yamlOf(rendered.filter(isCRD)), "apply", "--server-side", "--validate=strict", "-f", "-")
	c.must(t, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")

	// A NodePool that exists before the webhooks do, as in an upgrade from plain Karpenter.
	c.must(t, []byte(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: general
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`), "create", "-f", "-")

	// Every object is accepted with strict field validation, and Joiner's pod passes the "restricted"
	// Pod Security Standard that its Namespace enforces (the apiserver warns on the Deployment otherwise).
	out := c.must(t, yamlOf(rendered.filter(func(o object) bool { return !isCRD(o) })),
		"apply", "--server-side", "--validate=strict", "-f", "-")
	if strings.Contains(out, "PodSecurity") || strings.Contains(out, "Warning") {
		t.Errorf("applying config/default produced warnings:\n%s", out)
	}

	t.Run("the chart's objects are valid too (server-side dry run)", func(t *testing.T) {
		for _, set := range [][]string{nil, {"--set", "certManager.enabled=true"}} {
			m := parse(t, helmTemplate(t, defaultNamespace, set...)).filter(func(o object) bool {
				return !strings.HasPrefix(o.APIVersion, "cert-manager.io/") // cert-manager's CRDs are not installed here
			})
			out := c.must(t, yamlOf(m), "apply", "--server-side", "--force-conflicts", "--dry-run=server", "--validate=strict", "-f", "-")
			if strings.Contains(out, "Warning") {
				t.Errorf("helm template %v: warnings on a dry-run apply:\n%s", set, out)
			}
		}
	})

	t.Run("the controller's RBAC, as the apiserver evaluates it", func(t *testing.T) {
		// resource is TYPE[/NAME]; a subresource is given after a "|" (kubectl auth can-i --subresource).
		tests := []struct {
			verb, resource, ns string
			want               bool
		}{
			{"create", "nodeclaims.karpenter.sh", "", true},
			{"patch", "nodepools.karpenter.sh/general", "", true},
			{"patch", "nodeclaims.karpenter.sh|status", "", true},
			{"patch", "nodepools.karpenter.sh|status", "", true},
			{"update", "nodeclaims.karpenter.sh|finalizers", "", true},
			{"patch", "localnodeclasses.joiner.dev|status", "", true},
			{"create", "pods|eviction", "team-a", true},
			{"delete", "nodes", "", true},
			{"create", "events", "default", true},
			{"update", "validatingwebhookconfigurations/joiner-validation", "", true},
			{"update", "mutatingwebhookconfigurations/joiner-pod-tenancy", "", true},
			{"get", "secrets/joiner-webhook-cert", "joiner-system", true},
			{"create", "secrets", "joiner-system", true},
			{"update", "leases.coordination.k8s.io/joiner", "joiner-system", true},
			{"patch", "validatingwebhookconfigurations/another-vendor", "", false},
			{"delete", "validatingwebhookconfigurations/joiner-validation", "", false},
			{"get", "secrets/another-secret", "joiner-system", false},
			{"list", "secrets", "joiner-system", false},
			{"get", "secrets/joiner-webhook-cert", "kube-system", false},
			{"create", "secrets", "kube-system", false},
			{"update", "leases.coordination.k8s.io/kube-controller-manager", "kube-system", false},
			{"create", "pods", "team-a", false},
			{"create", "pods|exec", "team-a", false},
			{"patch", "pods|status", "team-a", false},
			{"get", "nodes|proxy", "", false},
			{"update", "deployments.apps", "joiner-system", false},
			{"delete", "nodepools.karpenter.sh/general", "", false},
			// Writes no code makes (issue 13): the objects Joiner's webhooks exempt it from are only
			// patched where a controller needs it, and never updated.
			{"update", "nodepools.karpenter.sh/general", "", false},
			{"update", "nodeclaims.karpenter.sh", "", false},
			// The EC2NodeClass controller patches its hash annotations and finalizer, and its status.
			{"patch", "ec2nodeclasses.karpenter.k8s.aws", "", true},
			{"update", "ec2nodeclasses.karpenter.k8s.aws", "", false},
			{"patch", "ec2nodeclasses.karpenter.k8s.aws|status", "", true},
			{"patch", "localnodeclasses.joiner.dev", "", false},
			{"update", "localnodeclasses.joiner.dev", "", false},
			{"update", "nodeclaims.karpenter.sh|status", "", false},
			{"update", "nodes", "", false},
			{"patch", "validatingwebhookconfigurations/joiner-validation", "", false},
			{"patch", "leases.coordination.k8s.io/joiner", "joiner-system", false},
			{"update", "clusterroles.rbac.authorization.k8s.io", "", false},
			// Volume topology lists and watches claims, volumes and StorageClasses through the
			// cache: never one by one, never a write.
			{"list", "persistentvolumeclaims", "team-a", true},
			{"watch", "storageclasses.storage.k8s.io", "", true},
			{"get", "persistentvolumes/pv-1", "", false},
			{"update", "persistentvolumeclaims", "team-a", false},
		}
		for _, tt := range tests {
			resource, sub, _ := strings.Cut(tt.resource, "|")
			args := []string{"auth", "can-i", tt.verb, resource, "--as", controllerUser}
			if sub != "" {
				args = append(args, "--subresource", sub)
			}
			if tt.ns != "" {
				args = append(args, "-n", tt.ns)
			}
			out, stderr, err := c.run(nil, args...)
			got := strings.TrimSpace(string(out)) == "yes"
			if err != nil && got {
				t.Errorf("kubectl %v: %v %s", args, err, stderr)
			}
			if got != tt.want {
				t.Errorf("%s may %s %s in %q: %v, want %v", controllerUser, tt.verb, tt.resource, tt.ns, got, tt.want)
			}
		}
	})

	t.Run("with Joiner down, NodePool edits fail closed", func(t *testing.T) {
		_, stderr, err := c.run(nil, "label", "nodepool", "general", "team=a")
		if err == nil || !(strings.Contains(stderr, "nodepool.defaulting.joiner.dev") || strings.Contains(stderr, "nodepool.validation.joiner.dev")) {
			t.Errorf("labelling a NodePool with no webhook backend: err %v, stderr %q; want a rejection by Joiner's NodePool webhooks", err, stderr)
		}
	})

	t.Run("Joiner's own service account is exempt from its webhooks", func(t *testing.T) {
		c.must(t, nil, "annotate", "nodepool", "general", "karpenter.sh/nodepool-hash=123", "--as", controllerUser)
	})

	t.Run("with Joiner down, Pods in bound namespaces are still admitted", func(t *testing.T) {
		c.must(t, []byte(`apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {joiner.dev/nodepools: bound}
  annotations: {joiner.dev/nodepools: "general"}
`), "create", "-f", "-")
		c.must(t, []byte(`apiVersion: v1
kind: Pod
metadata: {name: app, namespace: team-a}
spec:
  automountServiceAccountToken: false
  containers: [{name: app, image: registry.k8s.io/pause:3.10}]
`), "create", "-f", "-")
	})

	t.Run("the pre-delete hook removes the webhooks with its own RBAC and unblocks the API", func(t *testing.T) {
		hook := parse(t, helmTemplate(t, defaultNamespace)).filter(func(o object) bool {
			return o.Name == "joiner-webhook-cleanup"
		})
		c.must(t, yamlOf(hook.filter(func(o object) bool { return o.Kind != "Job" })), "apply", "--server-side", "-f", "-")
		var job batchv1.Job
		decode(t, hook.get(t, "Job", "joiner-webhook-cleanup"), &job)
		ctr := job.Spec.Template.Spec.Containers[0]
		// Run the Job's own kubectl command line (minus the binary), as the Job's service account.
		args := append(slices.Clone(ctr.Command[1:]), ctr.Args...)
		c.must(t, nil, append(args, "--as", "system:serviceaccount:joiner-system:joiner-webhook-cleanup")...)

		for _, kind := range []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"} {
			out := c.must(t, nil, "get", kind, "-o", "name")
			if strings.Contains(out, "joiner") {
				t.Errorf("after the hook, %s still has Joiner's: %s", kind, out)
			}
		}
		c.must(t, nil, "label", "nodepool", "general", "team=a")

		// Running it again (a retried hook) is harmless.
		c.must(t, nil, append(args, "--as", "system:serviceaccount:joiner-system:joiner-webhook-cleanup")...)
	})

	t.Run("the emergency step in the README works", func(t *testing.T) {
		// Re-create the webhooks, then run the documented commands verbatim.
		c.must(t, yamlOf(rendered.filter(func(o object) bool { return strings.HasSuffix(o.Kind, "WebhookConfiguration") })),
			"apply", "--server-side", "-f", "-")
		if _, _, err := c.run(nil, "label", "--overwrite", "nodepool", "general", "team=b"); err == nil {
			t.Fatal("the re-created webhooks should block NodePool edits again")
		}
		for _, step := range emergencyStep(t) {
			c.must(t, nil, step...)
		}
		c.must(t, nil, "label", "--overwrite", "nodepool", "general", "team=b")
	})
}

// emergencyStep returns the kubectl commands of the emergency step documented in config/README.md.
func emergencyStep(t *testing.T) [][]string {
	t.Helper()
	readme := string(mustRead(t, "config/README.md"))
	notes := string(mustRead(t, "charts/joiner/templates/NOTES.txt"))
	want := []string{
		"kubectl delete mutatingwebhookconfiguration joiner-defaulting joiner-pod-tenancy",
		"kubectl delete validatingwebhookconfiguration joiner-validation joiner-pod-tenancy",
	}
	var steps [][]string
	for _, line := range want {
		for name, doc := range map[string]string{"config/README.md": readme, "NOTES.txt": notes} {
			if !strings.Contains(doc, line) {
				t.Errorf("%s does not document the emergency step %q", name, line)
			}
		}
		steps = append(steps, strings.Fields(line)[1:])
	}
	return steps
}

func mustRead(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	return b
}
