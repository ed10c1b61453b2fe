// Package workloadtest_test checks the workload-template webhook against a real kube-apiserver that calls
// Joiner's webhooks over TLS: a workload whose Pods tenancy or an opted-in Pod policy would deny is
// rejected at `kubectl apply` with the template's field path, and `joiner check` (package admissioncheck)
// gives the same verdict and message for the same manifest. One control plane serves every test.
package workloadtest_test

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
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/joiner-dev/joiner/admissioncheck"
	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/policyobject"
	"github.com/joiner-dev/joiner/testbed"
)

var (
	cluster *framework.Cluster
	kubectl string
)

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	assets, err := testbed.FindAssets("")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	kubectl = filepath.Join(assets, "kubectl")
	cluster, err = framework.Start(context.Background(), testbed.Options{},
		operator.Options{Controllers: controllers.Options{AuditInterval: 2 * time.Second}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return framework.Main(m.Run, cluster)
}

// clusterManifest is the namespace team-a, bound to the NodePool team-a, and two Pod policies: no-latest judges
// workload templates, no-ssd does not.
const clusterManifest = `apiVersion: v1
kind: Namespace
metadata:
  name: team-a
  labels: {joiner.dev/nodepools: bound}
  annotations: {joiner.dev/nodepools: team-a}
---
apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata: {name: no-latest}
spec:
  match: {kinds: [Pod], workloadTemplates: true}
  rego: |
    package workloadtest.no_latest
    violation contains {"msg": sprintf("container %s uses a :latest image; pin a version", [c.name]), "field": sprintf("spec.containers[%d].image", [i])} if {
    	some i, c in input.review.object.spec.containers
    	endswith(c.image, ":latest")
    }
---
apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata: {name: no-ssd}
spec:
  match: {kinds: [Pod]}
  rego: |
    package workloadtest.no_ssd
    violation contains {"msg": "Pods may not select disk=ssd", "field": "spec.nodeSelector"} if {
    	input.review.object.spec.nodeSelector.disk == "ssd"
    }
`

// deployment is a Deployment of team-a whose Pods select nodeSelector and run image.
func deployment(name, nodeSelector, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %s, namespace: team-a}
spec:
  selector: {matchLabels: {app: %[1]s}}
  template:
    metadata: {labels: {app: %[1]s}}
    spec:
      nodeSelector: {%s}
      containers: [{name: app, image: %q}]
`, name, nodeSelector, image)
}

func TestWorkloadTemplates(t *testing.T) {
	install(t)
	cronJob := `apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly, namespace: team-a}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: job, image: "busybox:latest"}]
`
	tests := []struct {
		name     string
		manifest string
		// wantDenial is a line of the denial both kubectl and joiner check show; empty: admitted.
		wantDenial string
	}{
		{"Deployment breaking tenancy is rejected with the template's path", deployment("web-b", "karpenter.sh/nodepool: team-b", "nginx:1.27"),
			`spec.template.spec.nodeSelector[karpenter.sh/nodepool]: NodePool team-b is not bound to namespace "team-a" (bound: team-a); use only the bound NodePools`},
		{"opted-in policy rejects a Deployment", deployment("web-latest", "app: web", "nginx:latest"),
			`[no-latest] container app uses a :latest image; pin a version (field: spec.template.spec.containers[0].image)`},
		{"opted-in policy rejects a CronJob", cronJob,
			`[no-latest] container job uses a :latest image; pin a version (field: spec.jobTemplate.spec.template.spec.containers[0].image)`},
		{"policy not opted in leaves Deployments alone", deployment("web-ssd", "disk: ssd", "nginx:1.27"), ""},
		{"complying Deployment is admitted", deployment("web-a", "karpenter.sh/nodepool: team-a", "nginx:1.27"), ""},
	}
	checker := newChecker(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kubectlRun(tt.manifest, "apply", "-f", "-")
			res := check(t, checker, tt.manifest)
			if tt.wantDenial == "" {
				if err != nil {
					t.Fatalf("kubectl apply failed: %v\n%s", err, out)
				}
				if !res.Allowed {
					t.Fatalf("joiner check denied what the cluster admitted: %s", res.Error)
				}
				return
			}
			if err == nil {
				t.Fatalf("kubectl apply succeeded, want a denial containing %q:\n%s", tt.wantDenial, out)
			}
			if !strings.Contains(out, `admission webhook "workload.tenancy.joiner.dev" denied the request`) || !strings.Contains(out, tt.wantDenial) {
				t.Errorf("kubectl output lacks %q:\n%s", tt.wantDenial, out)
			}
			if res.Allowed || !strings.Contains(res.Error, tt.wantDenial) {
				t.Fatalf("joiner check: allowed %v, error %q; want a denial containing %q", res.Allowed, res.Error, tt.wantDenial)
			}
			if !strings.Contains(out, res.Error) {
				t.Errorf("joiner check's message %q is not the cluster's:\n%s", res.Error, out)
			}
		})
	}
	// The Pod-level check stays as the backstop: a Pod that no-ssd denies is still denied.
	pod := `apiVersion: v1
kind: Pod
metadata: {name: ssd, namespace: team-a}
spec:
  nodeSelector: {disk: ssd}
  containers: [{name: app, image: "nginx:1.27"}]
`
	if out, err := kubectlRun(pod, "apply", "-f", "-"); err == nil || !strings.Contains(out, "[no-ssd] Pods may not select disk=ssd (field: spec.nodeSelector)") {
		t.Errorf("a Pod breaking no-ssd: err %v, output:\n%s", err, out)
	}
}

// install applies the namespace and the policies and waits until both policies are enforced.
func install(t *testing.T) {
	t.Helper()
	if out, err := kubectlRun(clusterManifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("apply the namespace and policies: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, name := range []string{"no-latest", "no-ssd"} {
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			pp := &joinerv1alpha1.ProvisioningPolicy{}
			if err := cluster.Client.Get(ctx, types.NamespacedName{Name: name}, pp); err != nil {
				return false, nil
			}
			return meta.IsStatusConditionTrue(pp.Status.Conditions, joinerv1alpha1.ConditionReady) && pp.Status.CompiledGeneration == pp.Generation, nil
		})
		if err != nil {
			t.Fatalf("policy %s never became Ready: %v", name, err)
		}
	}
}

// newChecker is `joiner check` against the cluster's policies, as read from the context manifest.
func newChecker(t *testing.T) *admissioncheck.Checker {
	t.Helper()
	var policies []policy.Policy
	for _, obj := range documents(t, clusterManifest) {
		if obj["kind"] != "ProvisioningPolicy" {
			continue
		}
		var pp joinerv1alpha1.ProvisioningPolicy
		raw, _ := yaml.Marshal(obj)
		if err := yaml.Unmarshal(raw, &pp); err != nil {
			t.Fatal(err)
		}
		p, err := policyobject.ToPolicy(&pp)
		if err != nil {
			t.Fatal(err)
		}
		policies = append(policies, p)
	}
	c, err := admissioncheck.New(context.Background(), admissioncheck.Options{Policies: policies, StrictKinds: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// check runs the checker on the namespace and manifest and returns the verdict on manifest's object.
func check(t *testing.T, c *admissioncheck.Checker, manifest string) admissioncheck.Result {
	t.Helper()
	var items []admissioncheck.Item
	for i, obj := range documents(t, clusterManifest+"---\n"+manifest) {
		if obj["kind"] != "ProvisioningPolicy" {
			items = append(items, admissioncheck.Item{Source: fmt.Sprintf("doc#%d", i), Object: obj})
		}
	}
	rep, err := c.Check(context.Background(), items)
	if err != nil {
		t.Fatal(err)
	}
	return rep.Objects[len(rep.Objects)-1]
}

func documents(t *testing.T, manifests string) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifests), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out
			}
			t.Fatalf("decode manifests: %v", err)
		}
		if obj != nil {
			out = append(out, obj)
		}
	}
}

func kubectlRun(stdin string, args ...string) (string, error) {
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", cluster.Env.KubeconfigPath}, args...)...)
	cmd.Stdin = bytes.NewBufferString(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
