package webhooks_test

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/webhooks"
)

// The shapes the CRD schema admits and runtime validation rejects are denied at admission, one line each,
// and the set reasoning over requirements (contradictions, the catalog) does not add noise about them.
func TestValidateNodePoolRuntimeValidation(t *testing.T) {
	long := strings.Repeat("n", 64)
	dashValue := validation.IsValidLabelValue("-b")[0]
	tests := []struct {
		name        string
		mutate      func(np *karpv1.NodePool)
		wantDenials []string
	}{
		{
			name:        "label key with a name part over 63 characters",
			mutate:      func(np *karpv1.NodePool) { np.Spec.Template.Labels["example.com/"+long] = "a" },
			wantDenials: []string{`spec.template.metadata.labels[example.com/` + long + `]: key "example.com/` + long + `" is not a valid label key: name part must be no more than 63 bytes; rename the label`},
		},
		{
			name: "requirement key with a name part over 63 characters",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, req("example.com/"+long, corev1.NodeSelectorOpExists))
			},
			wantDenials: []string{`spec.template.spec.requirements[3].key: "example.com/` + long + `" is not a valid label key: name part must be no more than 63 bytes; shorten or rename the key`},
		},
		{
			name:        "requirement value starting with a dash",
			mutate:      func(np *karpv1.NodePool) { np.Spec.Template.Spec.Requirements[2].Values = []string{"a", "-b"} },
			wantDenials: []string{`spec.template.spec.requirements[2].values[1]: "-b" is not a valid label value: ` + dashValue + `; change the value`},
		},
		{
			name: "Exists with values",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements[2] = req("joiner.dev/team", corev1.NodeSelectorOpExists, "a")
			},
			wantDenials: []string{"spec.template.spec.requirements[2].values: operator Exists takes no values, got [a]; remove the values, or use operator In to require those values"},
		},
		{
			name:        "unknown capacity type",
			mutate:      func(np *karpv1.NodePool) { np.Spec.Template.Spec.Requirements[1].Values = []string{"spto"} },
			wantDenials: []string{`spec.template.spec.requirements[1].values[0]: "spto" is not a karpenter.sh/capacity-type value; use on-demand, reserved or spot`},
		},
		{
			name: "minValues counting duplicate values",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements[0].Values = []string{"amd64", "amd64"}
				np.Spec.Template.Spec.Requirements[0].MinValues = ptr(2)
			},
			wantDenials: []string{"spec.template.spec.requirements[0].minValues: minValues 2 needs 2 distinct values, but values [amd64, amd64] hold 1 (duplicates count once); add distinct values or lower minValues"},
		},
		{
			name:        "over-long taint key",
			mutate:      func(np *karpv1.NodePool) { np.Spec.Template.Spec.Taints[0].Key = "joiner.dev/" + long },
			wantDenials: []string{`spec.template.spec.taints[0].key: "joiner.dev/` + long + `" is not a valid taint key: name part must be no more than 63 bytes; shorten or rename the key`},
		},
		{
			name: "budget and runtime problems in one denial",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0", Schedule: ptr("0 25 * * *"), Duration: &metav1.Duration{Duration: 3600e9}}}
				np.Spec.Template.Spec.Requirements[1].Values = []string{"spot", "spto"}
			},
			wantDenials: []string{
				`spec.disruption.budgets[0].schedule: "0 25 * * *" is not a valid cron expression (end of range (25) above maximum (23))` + cronFix,
				`spec.template.spec.requirements[1].values[1]: "spto" is not a karpenter.sh/capacity-type value; use on-demand, reserved or spot`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{objects: []client.Object{ec2NodeClass("default")}, instanceTypes: catalogLister()})
			np := nodePool("general")
			tc.mutate(np)
			resp := e.handle(t, webhooks.PathValidateNodePool, request("NodePool", admissionv1.Create, "", np.Name, np, nil))
			assertDecision(t, resp, false, tc.wantDenials, nil)
		})
	}
}

func TestValidateNodePoolRuntimeValidationOnUpdate(t *testing.T) {
	good := nodePool("general")
	bad := nodePool("general")
	bad.Spec.Template.Spec.Requirements[1].Values = []string{"spto"}
	badLine := `spec.template.spec.requirements[1].values[0]: "spto" is not a karpenter.sh/capacity-type value; use on-demand, reserved or spot`
	relabelled := bad.DeepCopy()
	relabelled.Labels = map[string]string{"joiner.dev/owner": "platform"}
	tests := []struct {
		name         string
		obj, old     *karpv1.NodePool
		wantAllowed  bool
		wantDenials  []string
		wantWarnings []string
	}{
		{name: "update that introduces the problem is denied", obj: bad, old: good, wantDenials: []string{badLine}},
		{
			name: "unrelated update of a NodePool that got past the webhook is admitted with a warning", obj: relabelled, old: bad, wantAllowed: true,
			wantWarnings: []string{`pre-existing: spec.template.spec.requirements[1].values[0]: "spto" is not a karpenter.sh/capacity-type value; use on-demand, reserved or spot`},
		},
		{name: "update that fixes the problem is admitted", obj: good, old: bad, wantAllowed: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, envOptions{objects: []client.Object{ec2NodeClass("default")}})
			resp := e.handle(t, webhooks.PathValidateNodePool, updateReq(tc.obj, tc.old))
			assertDecision(t, resp, tc.wantAllowed, tc.wantDenials, tc.wantWarnings)
		})
	}
}

func TestValidateNodeClaimRuntimeValidation(t *testing.T) {
	long := strings.Repeat("n", 64)
	e := newEnv(t, envOptions{objects: []client.Object{ec2NodeClass("default")}, instanceTypes: catalogLister()})
	nc := nodeClaim("general-abcde")
	nc.Spec.Requirements = append(nc.Spec.Requirements, req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "preemptible"))
	nc.Spec.Taints = []karpv1.Taint{{Key: "example.com/" + long, Effect: corev1.TaintEffectNoSchedule}}
	resp := e.handle(t, webhooks.PathValidateNodeClaim, request("NodeClaim", admissionv1.Create, "", nc.Name, nc, nil))
	assertDecision(t, resp, false, []string{
		`spec.requirements[2].values[0]: "preemptible" is not a karpenter.sh/capacity-type value; use on-demand, reserved or spot`,
		`spec.taints[0].key: "example.com/` + long + `" is not a valid taint key: name part must be no more than 63 bytes; shorten or rename the key`,
	}, nil)
}
