package webhooks_test

import (
	"context"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

func stringReader(s string) io.Reader { return strings.NewReader(s) }

// installPolicies applies the test policies and waits until each is compiled (Ready=True).
func installPolicies(t *testing.T) {
	t.Helper()
	nc := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if err := c.Create(context.Background(), nc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create the LocalNodeClass the NodePools refer to: %v", err)
	}
	out, err := kubectlRun(t, "", "apply", "-f", "testdata/policies")
	if err != nil {
		t.Fatalf("apply policies: %v\n%s", err, out)
	}
	for _, name := range []string{"e2e-cpu-cap", "e2e-team-label", "e2e-spot-dryrun"} {
		waitFor(t, 30*time.Second, "policy "+name+" Ready", func(ctx context.Context) (bool, error) {
			pp := &joinerv1alpha1.ProvisioningPolicy{}
			if err := c.Get(ctx, types.NamespacedName{Name: name}, pp); err != nil {
				return false, nil
			}
			return meta.IsStatusConditionTrue(pp.Status.Conditions, joinerv1alpha1.ConditionReady) && pp.Status.CompiledGeneration == pp.Generation, nil
		})
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond wait.ConditionWithContextFunc) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func deleteNodePool(t *testing.T, name string) {
	t.Cleanup(func() {
		np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := c.Delete(context.Background(), np); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete nodepool %s: %v", name, err)
		}
	})
}

func TestKubectlApplyShowsPolicyVerdicts(t *testing.T) {
	installPolicies(t)
	tests := []struct {
		name       string
		manifest   string
		wantErr    bool
		wantOutput []string
		notOutput  []string
	}{
		{
			name: "deny policy rejects with one line per violation", manifest: "testdata/manifests/too-big.yaml", wantErr: true,
			wantOutput: []string{`denied the request: [e2e-cpu-cap] spec.limits.cpu 500 exceeds the cap of 100 (field: spec.limits.cpu)`},
		},
		{
			name: "deny policy on a missing field", manifest: "testdata/manifests/no-limit.yaml", wantErr: true,
			wantOutput: []string{`[e2e-cpu-cap] NodePool has no CPU limit; set spec.limits.cpu (field: spec.limits.cpu)`},
		},
		{
			name: "a compliant NodePool is created", manifest: "testdata/manifests/good.yaml",
			wantOutput: []string{"nodepool.karpenter.sh/e2e-good created"},
			notOutput:  []string{"Warning:", "e2e-spot-dryrun"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := kubectlRun(t, "", "apply", "-f", tt.manifest)
			if tt.wantErr != (err != nil) {
				t.Fatalf("kubectl apply err = %v, want error %v\n%s", err, tt.wantErr, out)
			}
			if err == nil {
				_, _ = kubectlRun(t, "", "delete", "-f", tt.manifest)
			}
			for _, w := range tt.wantOutput {
				if !strings.Contains(out, w) {
					t.Errorf("kubectl output lacks %q:\n%s", w, out)
				}
			}
			for _, w := range tt.notOutput {
				if strings.Contains(out, w) {
					t.Errorf("kubectl output has %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestWarnPolicyShowsWarningAndDryRunOnlyRecords(t *testing.T) {
	installPolicies(t)
	manifest := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: e2e-unlabelled-ondemand
spec:
  limits: {cpu: "10"}
  template:
    spec:
      nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
`
	deleteNodePool(t, "e2e-unlabelled-ondemand")
	out, err := kubectlRun(t, manifest, "apply", "-f", "-")
	if err != nil {
		t.Fatalf("a Warn/DryRun violation must not block: %v\n%s", err, out)
	}
	if !strings.Contains(out, "Warning: [e2e-team-label] NodePool has no joiner.dev/team label; add one (field: metadata.labels)") {
		t.Errorf("kubectl output lacks the Warn policy's warning:\n%s", out)
	}
	if strings.Contains(out, "e2e-spot-dryrun") {
		t.Errorf("a DryRun policy showed up in kubectl's output:\n%s", out)
	}
	// The DryRun violation is recorded by the audit in the policy's status.
	waitFor(t, 30*time.Second, "the audit to record the DryRun violation", func(ctx context.Context) (bool, error) {
		pp := &joinerv1alpha1.ProvisioningPolicy{}
		if err := c.Get(ctx, types.NamespacedName{Name: "e2e-spot-dryrun"}, pp); err != nil {
			return false, nil
		}
		for _, v := range pp.Status.Violations {
			if v.Kind == "NodePool" && v.Name == "e2e-unlabelled-ondemand" && v.Field == "spec.template.spec.requirements[0]" {
				return pp.Status.AuditTimestamp != nil && pp.Status.TotalViolations >= 1, nil
			}
		}
		return false, nil
	})
}

func TestSemanticValidation(t *testing.T) {
	installPolicies(t)
	manifest := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: e2e-contradiction
  labels: {joiner.dev/team: team-a}
spec:
  limits: {cpu: "10"}
  disruption:
    consolidateAfter: 30s
    budgets:
      - {nodes: "1", schedule: "0 25 * * *", duration: 1h}
  template:
    spec:
      nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: default}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [arm64]}
        - {key: kubernetes.io/arch, operator: NotIn, values: [arm64]}
`
	out, err := kubectlRun(t, manifest, "apply", "-f", "-")
	if err == nil {
		_, _ = kubectlRun(t, manifest, "delete", "-f", "-")
		t.Fatalf("contradictory requirements and a bad cron schedule were accepted:\n%s", out)
	}
	for _, want := range []string{"spec.disruption.budgets[0].schedule", "spec.template.spec.requirements[1]", "kubernetes.io/arch"} {
		if !strings.Contains(out, want) {
			t.Errorf("denial lacks %q:\n%s", want, out)
		}
	}
}

func TestPolicyWithSyntaxErrorIsRejectedWithPosition(t *testing.T) {
	manifest := `apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata:
  name: e2e-broken
spec:
  match: {kinds: [NodePool]}
  rego: |
    package e2e.broken

    violation contains {"msg": "x"} if {
      input.review.object.spec.limits.cpu >
    }
`
	out, err := kubectlRun(t, manifest, "apply", "-f", "-")
	if err == nil {
		_, _ = kubectlRun(t, manifest, "delete", "-f", "-")
		t.Fatalf("a policy with a syntax error was accepted:\n%s", out)
	}
	if !regexp.MustCompile(`\b\d+:\d+\b`).MatchString(out) || !strings.Contains(out, "e2e-broken") && !strings.Contains(out, "rego") {
		t.Errorf("the denial does not give a line and column:\n%s", out)
	}
	netManifest := strings.Replace(manifest, `input.review.object.spec.limits.cpu >`, `http.send({"method": "get", "url": "http://x"}).status_code == 200`, 1)
	out, err = kubectlRun(t, netManifest, "apply", "-f", "-")
	if err == nil {
		_, _ = kubectlRun(t, netManifest, "delete", "-f", "-")
		t.Fatalf("a policy calling http.send was accepted:\n%s", out)
	}
	if !strings.Contains(out, "http.send") {
		t.Errorf("the denial does not name http.send:\n%s", out)
	}
}

func TestPodTenancy(t *testing.T) {
	ctx := context.Background()
	installPolicies(t)
	for _, np := range []string{`apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: tenant-a, labels: {joiner.dev/team: team-a, joiner.dev/tenant: a}}
spec:
  limits: {cpu: "10"}
  template:
    spec:
      nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: default}
      taints: [{key: tenant, value: a, effect: NoSchedule}]
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
`, `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: tenant-b, labels: {joiner.dev/team: team-b, joiner.dev/tenant: b}}
spec:
  limits: {cpu: "10"}
  template:
    spec:
      nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: default}
      taints: [{key: tenant, value: b, effect: NoSchedule}]
      requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
`} {
		if out, err := kubectlRun(t, np, "apply", "-f", "-"); err != nil {
			t.Fatalf("create tenant NodePool: %v\n%s", err, out)
		}
	}
	deleteNodePool(t, "tenant-a")
	deleteNodePool(t, "tenant-b")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a",
		Labels:      map[string]string{"joiner.dev/nodepools": "bound"},
		Annotations: map[string]string{"joiner.dev/nodepools": "tenant-a"}}}
	if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "default service account in team-a", func(ctx context.Context) (bool, error) {
		return c.Get(ctx, types.NamespacedName{Namespace: "team-a", Name: "default"}, &corev1.ServiceAccount{}) == nil, nil
	})
	pod := func(ns, name string, selector map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PodSpec{NodeSelector: selector, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}}
	}

	// A pod that targets another tenant's NodePool is denied.
	err := c.Create(ctx, pod("team-a", "steal", map[string]string{"karpenter.sh/nodepool": "tenant-b"}))
	if err == nil || !strings.Contains(err.Error(), "tenant-b") {
		t.Errorf("a team-a pod selecting tenant-b's NodePool: err = %v, want a denial naming tenant-b", err)
	}

	// A pod without node selection gets its namespace's NodePool and its taint's toleration.
	p := pod("team-a", "plain", nil)
	if err := c.Create(ctx, p); err != nil {
		t.Fatalf("create a plain team-a pod: %v", err)
	}
	if got := p.Spec.NodeSelector["karpenter.sh/nodepool"]; got != "tenant-a" {
		t.Errorf("injected nodeSelector = %v, want karpenter.sh/nodepool=tenant-a", p.Spec.NodeSelector)
	}
	tolerated := false
	for _, tol := range p.Spec.Tolerations {
		if tol.Key == "tenant" && tol.Value == "a" && tol.Effect == corev1.TaintEffectNoSchedule {
			tolerated = true
		}
	}
	if !tolerated {
		t.Errorf("tenant-a's taint is not tolerated: %v", p.Spec.Tolerations)
	}

	// kube-system is never touched, even with another tenant's selector.
	sys := pod("kube-system", "system-pod", map[string]string{"karpenter.sh/nodepool": "tenant-b"})
	if err := c.Create(ctx, sys); err != nil {
		t.Fatalf("a kube-system pod was blocked: %v", err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), sys) })
	if len(sys.Spec.NodeSelector) != 1 || len(sys.Spec.Tolerations) > 2 {
		t.Errorf("the kube-system pod was changed: selector %v tolerations %v", sys.Spec.NodeSelector, sys.Spec.Tolerations)
	}
}

// TestOfflineCheckAgreesWithWebhook runs `joiner policy check` on the same manifests and policies and
// checks that every Deny line it prints is exactly what the webhook told kubectl.
func TestOfflineCheckAgreesWithWebhook(t *testing.T) {
	installPolicies(t)
	cmd := exec.Command(joinerBin, "policy", "check", "--policies", "testdata/policies", "-f", "testdata/manifests")
	out, err := cmd.CombinedOutput()
	exitErr, ok := err.(*exec.ExitError)
	if !ok || exitErr.ExitCode() != 1 {
		t.Fatalf("joiner policy check: err = %v, want exit 1\n%s", err, out)
	}
	denies := map[string][]string{}
	for _, line := range strings.Split(string(out), "\n") {
		src, rest, ok := strings.Cut(line, ": deny ")
		if !ok {
			continue
		}
		file, _, _ := strings.Cut(strings.Fields(src)[0], "#")
		denies[file] = append(denies[file], rest)
	}
	if len(denies) != 2 {
		t.Fatalf("want deny lines for the two bad manifests, got %v\n%s", denies, out)
	}
	for file, lines := range denies {
		kout, err := kubectlRun(t, "", "apply", "-f", file)
		if err == nil {
			_, _ = kubectlRun(t, "", "delete", "-f", file)
			t.Errorf("%s: the webhook admitted what the offline check denies", file)
			continue
		}
		for _, l := range lines {
			if !strings.Contains(kout, l) {
				t.Errorf("%s: the webhook's denial lacks the offline line %q:\n%s", file, l, kout)
			}
		}
	}
}

// TestDefaultingIsIdempotentUnderServerSideApply applies a minimal NodePool twice with server-side
// apply, through the defaulting and validating webhooks: the second apply must change nothing, and
// kubectl diff must show no drift, as GitOps tools expect.
func TestDefaultingIsIdempotentUnderServerSideApply(t *testing.T) {
	installPolicies(t)
	manifest := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: e2e-gitops
  labels: {joiner.dev/team: team-a}
spec:
  limits: {cpu: "20"}
  template:
    spec:
      expireAfter: 168h
      nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: default}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
`
	deleteNodePool(t, "e2e-gitops")
	generation := func() int64 {
		np := &karpv1.NodePool{}
		if err := c.Get(context.Background(), types.NamespacedName{Name: "e2e-gitops"}, np); err != nil {
			t.Fatal(err)
		}
		if np.Spec.Disruption.ConsolidateAfter.String() == "" || len(np.Spec.Disruption.Budgets) == 0 {
			t.Errorf("defaults missing: %+v", np.Spec.Disruption)
		}
		if got := np.Spec.Template.Spec.ExpireAfter.String(); got != "168h" {
			t.Errorf("expireAfter read back as %q, want the 168h that was written", got)
		}
		return np.Generation
	}
	if out, err := kubectlRun(t, manifest, "apply", "--server-side", "--field-manager=gitops", "-f", "-"); err != nil {
		t.Fatalf("first apply: %v\n%s", err, out)
	}
	first := generation()
	if out, err := kubectlRun(t, manifest, "apply", "--server-side", "--field-manager=gitops", "-f", "-"); err != nil {
		t.Fatalf("second apply: %v\n%s", err, out)
	}
	if second := generation(); second != first {
		t.Errorf("re-applying the same manifest changed the NodePool's spec (generation %d -> %d)", first, second)
	}
	out, err := kubectlRun(t, manifest, "diff", "--server-side", "--field-manager=gitops", "-f", "-")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Errorf("kubectl diff shows drift (err %v):\n%s", err, out)
	}
}
