package nodepool_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/nodepool"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// readyClass creates the LocalNodeClass name, Ready, unless it exists, so that only validation
// decides the NodePools' readiness.
func readyClass(t *testing.T, name string) {
	t.Helper()
	class := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := env.Client.Create(t.Context(), class); err != nil {
		t.Fatal(err)
	}
	setClassReady(t, class, metav1.ConditionTrue, "")
}

// NodePools written straight to the API server (no webhook runs in this test bed, as when Joiner's
// webhook was down or not installed yet) are flagged with ValidationSucceeded=False and are not Ready.
func TestNodePoolValidationFlagsWhatTheWebhookWouldDeny(t *testing.T) {
	long := strings.Repeat("n", 64)
	tests := []struct {
		name        string
		mutate      func(np *karpv1.NodePool)
		wantStatus  metav1.ConditionStatus
		wantMessage []string
	}{
		{name: "valid NodePool", mutate: func(*karpv1.NodePool) {}, wantStatus: metav1.ConditionTrue},
		{
			name:        "invalid label key",
			mutate:      func(np *karpv1.NodePool) { np.Spec.Template.Labels = map[string]string{"team name": "a"} },
			wantStatus:  metav1.ConditionFalse,
			wantMessage: []string{`spec.template.metadata.labels[team name]: key "team name" is not a valid label key: `, "; rename the label"},
		},
		{
			name: "requirement key name over 63 characters",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements[0].Key = "example.com/" + long
			},
			wantStatus:  metav1.ConditionFalse,
			wantMessage: []string{`spec.template.spec.requirements[0].key: "example.com/` + long + `" is not a valid label key: name part must be no more than 63 bytes; shorten or rename the key`},
		},
		{
			name:        "requirement value starting with a dash",
			mutate:      func(np *karpv1.NodePool) { np.Spec.Template.Spec.Requirements[0].Values = []string{"-amd64"} },
			wantStatus:  metav1.ConditionFalse,
			wantMessage: []string{`spec.template.spec.requirements[0].values[0]: "-amd64" is not a valid label value: `, "; change the value"},
		},
		{
			name: "Exists with values",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements[0] = karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpExists, Values: []string{"amd64"}}
			},
			wantStatus:  metav1.ConditionFalse,
			wantMessage: []string{"spec.template.spec.requirements[0].values: operator Exists takes no values, got [amd64]; remove the values, or use operator In to require those values"},
		},
		{
			name: "unknown capacity type",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Requirements[0] = karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spto"}}
			},
			wantStatus:  metav1.ConditionFalse,
			wantMessage: []string{`spec.template.spec.requirements[0].values[0]: "spto" is not a karpenter.sh/capacity-type value; use on-demand, reserved or spot`},
		},
		{
			name: "minValues counting duplicate values",
			mutate: func(np *karpv1.NodePool) {
				two := 2
				np.Spec.Template.Spec.Requirements[0].Values = []string{"amd64", "amd64"}
				np.Spec.Template.Spec.Requirements[0].MinValues = &two
			},
			wantStatus:  metav1.ConditionFalse,
			wantMessage: []string{"spec.template.spec.requirements[0].minValues: minValues 2 needs 2 distinct values, but values [amd64, amd64] hold 1 (duplicates count once); add distinct values or lower minValues"},
		},
		{
			name: "over-long taint key",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Spec.Taints = []karpv1.Taint{{Key: "example.com/" + long, Effect: corev1.TaintEffectNoSchedule}}
			},
			wantStatus:  metav1.ConditionFalse,
			wantMessage: []string{`spec.template.spec.taints[0].key: "example.com/` + long + `" is not a valid taint key: name part must be no more than 63 bytes; shorten or rename the key`},
		},
		{
			name: "many problems are listed up to ten",
			mutate: func(np *karpv1.NodePool) {
				np.Spec.Template.Labels = map[string]string{}
				for i := range 12 {
					np.Spec.Template.Labels[fmt.Sprintf("bad key %02d", i)] = "a"
				}
			},
			wantStatus:  metav1.ConditionFalse,
			wantMessage: []string{`spec.template.metadata.labels[bad key 00]`, `spec.template.metadata.labels[bad key 09]`, "\n(and 2 more problems; the validating webhook lists them all"},
		},
	}
	startController(t)
	readyClass(t, "validation")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			np := newNodePool(nct.Name("pool"), localClassRef("validation"))
			tc.mutate(np)
			if err := env.Client.Create(t.Context(), np); err != nil {
				t.Fatalf("the CRD schema must admit this shape for the test to mean anything: %v", err)
			}
			wantReason, rootReason := nodepool.ReasonValidationSucceeded, nodepool.ReasonReady
			if tc.wantStatus == metav1.ConditionFalse {
				wantReason, rootReason = nodepool.ReasonValidationFailed, nodepool.ReasonValidationFailed
			}
			nct.Eventually(t, 10*time.Second, "ValidationSucceeded", func(ctx context.Context) error {
				if err := env.Get(ctx, np); err != nil {
					return err
				}
				errs := []error{
					checkCondition(np, karpv1.ConditionTypeValidationSucceeded, tc.wantStatus, wantReason, ""),
					checkCondition(np, karpv1.ConditionTypeReady, tc.wantStatus, rootReason, ""),
				}
				for _, part := range tc.wantMessage {
					errs = append(errs, checkCondition(np, karpv1.ConditionTypeValidationSucceeded, tc.wantStatus, wantReason, part))
				}
				return errors.Join(errs...)
			})
			if tc.wantStatus == metav1.ConditionFalse {
				if msg := np.StatusCondition(karpv1.ConditionTypeValidationSucceeded).Message; strings.Contains(msg, "bad key 10") {
					t.Errorf("message lists more than ten problems:\n%s", msg)
				}
			}
		})
	}
}

// Fixing a flagged NodePool turns ValidationSucceeded (and Ready) back to True.
func TestNodePoolValidationRecoversWhenFixed(t *testing.T) {
	startController(t)
	readyClass(t, "validation-fix")
	np := newNodePool(nct.Name("pool"), localClassRef("validation-fix"))
	np.Spec.Template.Spec.Requirements[0] = karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"spto"}}
	if err := env.Client.Create(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name       string
		act        func(t *testing.T)
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{name: "flagged", act: func(*testing.T) {}, wantStatus: metav1.ConditionFalse, wantReason: nodepool.ReasonValidationFailed},
		{name: "fixed", act: func(t *testing.T) {
			stored := np.DeepCopy()
			np.Spec.Template.Spec.Requirements[0].Values = []string{karpv1.CapacityTypeSpot}
			if err := env.Client.Patch(t.Context(), np, client.MergeFrom(stored)); err != nil {
				t.Fatal(err)
			}
		}, wantStatus: metav1.ConditionTrue, wantReason: nodepool.ReasonValidationSucceeded},
	}
	for _, step := range steps {
		step.act(t)
		nct.Eventually(t, 10*time.Second, step.name, func(ctx context.Context) error {
			if err := env.Get(ctx, np); err != nil {
				return err
			}
			cond := np.StatusCondition(karpv1.ConditionTypeValidationSucceeded)
			if cond != nil && cond.ObservedGeneration != np.Generation {
				return fmt.Errorf("ValidationSucceeded observed generation %d, NodePool is at %d", cond.ObservedGeneration, np.Generation)
			}
			return errors.Join(checkCondition(np, karpv1.ConditionTypeValidationSucceeded, step.wantStatus, step.wantReason, ""),
				checkCondition(np, karpv1.ConditionTypeReady, step.wantStatus, "", ""))
		})
	}
}
