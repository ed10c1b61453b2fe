package webhooks_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/nodepool"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
)

// name64 is one character longer than the name part of a label or taint key may be.
var name64 = strings.Repeat("n", 64)

// shapedNodePool renders a NodePool manifest with the given template labels (a YAML flow map, or ""),
// extra requirements after `kubernetes.io/arch In [amd64]`, and taints (YAML flow mappings).
func shapedNodePool(name, labels string, requirements, taints []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %s
  labels: {joiner.dev/team: team-a}
spec:
  limits: {cpu: "10"}
  template:
`, name)
	if labels != "" {
		fmt.Fprintf(&b, "    metadata:\n      labels: %s\n", labels)
	}
	fmt.Fprintf(&b, `    spec:
      nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: %s}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`, framework.NodeClassName)
	for _, r := range requirements {
		fmt.Fprintf(&b, "        - %s\n", r)
	}
	if len(taints) > 0 {
		fmt.Fprintf(&b, "      taints: [%s]\n", strings.Join(taints, ", "))
	}
	return b.String()
}

// A platform engineer applying a NodePool that the CRD schema lets through but Karpenter would only
// flag later (ValidationSucceeded=False, the NodePool silently unused) is told at kubectl apply what is
// wrong and how to fix it.
func TestRuntimeValidationRefusedAtAdmission(t *testing.T) {
	cluster.EnsureNodeClass(t)
	tests := []struct {
		name         string
		labels       string
		requirements []string
		taints       []string
		wantOutput   []string
	}{
		{
			name: "invalid label key", labels: `{"team name": a}`,
			wantOutput: []string{`spec.template.metadata.labels[team name]: key "team name" is not a valid label key: name part must consist of alphanumeric characters`, "; rename the label"},
		},
		{
			name: "requirement key with a name part over 63 characters", requirements: []string{`{key: example.com/` + name64 + `, operator: Exists}`},
			wantOutput: []string{`spec.template.spec.requirements[1].key: "example.com/` + name64 + `" is not a valid label key: name part must be no more than 63 bytes; shorten or rename the key`},
		},
		{
			name: "requirement value that is not a label value", requirements: []string{`{key: joiner.dev/tier, operator: In, values: ["gold silver"]}`},
			wantOutput: []string{`spec.template.spec.requirements[1].values[0]: "gold silver" is not a valid label value: `, "; change the value"},
		},
		{
			name: "requirement value starting with a dash", requirements: []string{`{key: joiner.dev/tier, operator: NotIn, values: ["-gold"]}`},
			wantOutput: []string{`spec.template.spec.requirements[1].values[0]: "-gold" is not a valid label value: `, "must start and end with an alphanumeric character", "; change the value"},
		},
		{
			name: "Exists with values", requirements: []string{`{key: example.com/gpu, operator: Exists, values: [a100]}`},
			wantOutput: []string{"spec.template.spec.requirements[1].values: operator Exists takes no values, got [a100]; remove the values, or use operator In to require those values"},
		},
		{
			name: "unknown capacity type", requirements: []string{`{key: karpenter.sh/capacity-type, operator: In, values: [spot, spto]}`},
			wantOutput: []string{`spec.template.spec.requirements[1].values[1]: "spto" is not a karpenter.sh/capacity-type value; use on-demand, reserved or spot`},
		},
		{
			name: "minValues counting duplicate values", requirements: []string{`{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a, us-east-1a], minValues: 2}`},
			wantOutput: []string{"spec.template.spec.requirements[1].minValues: minValues 2 needs 2 distinct values, but values [us-east-1a, us-east-1a] hold 1 (duplicates count once); add distinct values or lower minValues"},
		},
		{
			name: "over-long taint key", taints: []string{`{key: example.com/` + name64 + `, effect: NoSchedule}`},
			wantOutput: []string{`spec.template.spec.taints[0].key: "example.com/` + name64 + `" is not a valid taint key: name part must be no more than 63 bytes; shorten or rename the key`},
		},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			name := fmt.Sprintf("e2e-runtime-shape-%d", i)
			manifest := shapedNodePool(name, tc.labels, tc.requirements, tc.taints)
			out, err := kubectlRun(t, manifest, "apply", "-f", "-")
			if err == nil {
				_, _ = kubectlRun(t, "", "delete", "nodepool", name)
				t.Fatalf("kubectl apply admitted the NodePool:\n%s", out)
			}
			// The denial comes from Joiner's webhook, not from the CRD schema: the shape got past it.
			want := append([]string{`admission webhook "nodepool.validation.joiner.dev" denied the request: `}, tc.wantOutput...)
			for _, w := range want {
				if !strings.Contains(out, w) {
					t.Errorf("kubectl output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

// withoutValidatingWebhook removes Joiner's ValidatingWebhookConfiguration, as when Joiner is down or not
// installed yet, and returns the function that puts it back and waits until the API server calls the
// webhook again (a dry-run create of an invalid NodePool is denied). The test's cleanup restores it too.
func withoutValidatingWebhook(t *testing.T) (restore func()) {
	t.Helper()
	ctx := context.Background()
	saved := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(ctx, types.NamespacedName{Name: operator.ValidatingValidation}, saved); err != nil {
		t.Fatalf("read the validating webhook configuration: %v", err)
	}
	if err := c.Delete(ctx, saved); err != nil {
		t.Fatalf("delete the validating webhook configuration: %v", err)
	}
	restored := false
	restore = func() {
		if restored {
			return
		}
		restored = true
		cfg := saved.DeepCopy()
		cfg.ObjectMeta = metav1.ObjectMeta{Name: saved.Name, Labels: saved.Labels, Annotations: saved.Annotations}
		if err := c.Create(ctx, cfg); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("restore the validating webhook configuration: %v", err)
		}
		probe := invalidNodePool("e2e-webhook-probe")
		waitFor(t, 30*time.Second, "the validating webhook to be called again", func(ctx context.Context) (bool, error) {
			err := c.Create(ctx, probe.DeepCopy(), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), "nodepool.validation.joiner.dev"), nil
		})
	}
	t.Cleanup(restore)
	return restore
}

// invalidNodePool returns a NodePool the CRD schema admits and runtime validation does not: an unknown
// capacity type and an over-long taint key.
func invalidNodePool(name string) *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"joiner.dev/team": "team-a"}},
		Spec: karpv1.NodePoolSpec{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")},
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "joiner.dev", Kind: "LocalNodeClass", Name: framework.NodeClassName},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
					framework.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, "amd64"),
					framework.Req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spto"),
				},
				Taints: []karpv1.Taint{{Key: "example.com/" + name64, Effect: corev1.TaintEffectNoSchedule}},
			}},
		},
	}
}

// A NodePool written while Joiner's validating webhook was absent is not trusted: the NodePool status
// controller flags it with ValidationSucceeded=False and the same messages the webhook gives, so it is not
// Ready; later edits are admitted with the old problems as warnings, and fixing it clears the flag.
func TestNodePoolCreatedWithoutTheWebhookIsFlagged(t *testing.T) {
	cluster.EnsureNodeClass(t)
	const name = "e2e-runtime-unvalidated"
	deleteNodePool(t, name)
	restore := withoutValidatingWebhook(t)
	np := invalidNodePool(name)
	// The API server notices the deleted configuration within moments; until then the webhook denies.
	waitFor(t, 30*time.Second, "the NodePool to be created without the validating webhook", func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, np.DeepCopy())
		switch {
		case err == nil:
			return true, nil
		case strings.Contains(err.Error(), "nodepool.validation.joiner.dev"):
			return false, nil
		default:
			return false, err
		}
	})
	restore()

	wantLines := []string{
		`spec.template.spec.requirements[1].values[0]: "spto" is not a karpenter.sh/capacity-type value; use on-demand, reserved or spot`,
		`spec.template.spec.taints[0].key: "example.com/` + name64 + `" is not a valid taint key: name part must be no more than 63 bytes; shorten or rename the key`,
	}
	waitFor(t, 30*time.Second, "ValidationSucceeded=False with the webhook's messages", func(ctx context.Context) (bool, error) {
		got := &karpv1.NodePool{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			return false, err
		}
		cond, ready := got.StatusCondition(karpv1.ConditionTypeValidationSucceeded), got.StatusCondition(karpv1.ConditionTypeReady)
		flagged := cond != nil && cond.Status == metav1.ConditionFalse && cond.Reason == nodepool.ReasonValidationFailed &&
			cond.Message == strings.Join(wantLines, "\n")
		notReady := ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == nodepool.ReasonValidationFailed
		return flagged && notReady, nil
	})
	out, err := kubectlRun(t, "", "get", "nodepool", name, "-o", `jsonpath={.status.conditions[?(@.type=="ValidationSucceeded")].reason}`)
	if err != nil || out != nodepool.ReasonValidationFailed {
		t.Errorf("kubectl shows ValidationSucceeded reason %q (err %v), want %s", out, err, nodepool.ReasonValidationFailed)
	}

	// An unrelated edit is not blocked by the problems the NodePool already has; they come back as warnings.
	out, err = kubectlRun(t, "", "label", "nodepool", name, "joiner.dev/owner=platform")
	if err != nil {
		t.Fatalf("labelling the flagged NodePool was refused: %v\n%s", err, out)
	}
	if !strings.Contains(out, `Warning: pre-existing: spec.template.spec.requirements[1].values[0]: "spto" is not a karpenter.sh/capacity-type value`) {
		t.Errorf("kubectl output lacks the pre-existing problem as a warning:\n%s", out)
	}

	// Fixing the NodePool through the webhook clears the flag.
	fix := `{"spec":{"template":{"spec":{"requirements":[{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]},{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]}],"taints":[{"key":"example.com/gpu","effect":"NoSchedule"}]}}}}`
	if out, err := kubectlRun(t, "", "patch", "nodepool", name, "--type", "merge", "-p", fix); err != nil {
		t.Fatalf("fixing the NodePool was refused: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "ValidationSucceeded=True once fixed", func(ctx context.Context) (bool, error) {
		got := &karpv1.NodePool{}
		if err := c.Get(ctx, types.NamespacedName{Name: name}, got); err != nil {
			return false, err
		}
		cond := got.StatusCondition(karpv1.ConditionTypeValidationSucceeded)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.ObservedGeneration == got.Generation, nil
	})
}
