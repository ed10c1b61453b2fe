package nodepool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/prometheus/client_golang/prometheus"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/nodepool"
	"github.com/joiner-dev/joiner/controllers/state"
	"github.com/joiner-dev/joiner/testbed"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// env is the control plane the package's tests share (apiserver only).
var env *nct.Env

func TestMain(m *testing.M) {
	os.Exit(nct.Main(m, &env, testbed.Options{}))
}

func startController(t *testing.T) {
	t.Helper()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		c, err := nodepool.NewController(mgr.GetClient(), mgr.GetRESTMapper(), nil, prometheus.NewRegistry(), nodepool.Options{})
		if err != nil {
			return err
		}
		return c.SetupWithManager(mgr)
	})
}

func newNodePool(name string, ref karpv1.NodeClassReference) *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
			NodeClassRef: &ref,
		}}},
	}
}

func localClassRef(name string) karpv1.NodeClassReference {
	return karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: "LocalNodeClass", Name: name}
}

// launchedNodeClaim creates a NodeClaim of the pool whose status reports the capacity.
func launchedNodeClaim(t *testing.T, pool string, capacity corev1.ResourceList) *karpv1.NodeClaim {
	t.Helper()
	nc := nct.NodeClaim(nct.Name("nc"), pool)
	if err := env.Client.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	if capacity != nil {
		nc.Status.Capacity = capacity
		if err := env.Client.Status().Update(t.Context(), nc); err != nil {
			t.Fatal(err)
		}
	}
	return nc
}

func checkResources(np *karpv1.NodePool, want map[corev1.ResourceName]string) error {
	var errs []error
	for name, w := range want {
		got, ok := np.Status.Resources[name]
		if !ok || got.Cmp(resource.MustParse(w)) != 0 {
			errs = append(errs, fmt.Errorf("resources[%s] = %s, want %s", name, got.String(), w))
		}
	}
	if wantNodes := resource.MustParse(want[state.ResourceNodes]); np.Status.Nodes == nil || *np.Status.Nodes != wantNodes.Value() {
		errs = append(errs, fmt.Errorf("status.nodes = %v, want %s", np.Status.Nodes, want[state.ResourceNodes]))
	}
	return errors.Join(errs...)
}

func TestNodePoolStatusAddsUpItsNodeClaims(t *testing.T) {
	startController(t)
	np := newNodePool(nct.Name("pool"), localClassRef("default"))
	if err := env.Client.Create(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	big := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods: resource.MustParse("10"), corev1.ResourceEphemeralStorage: resource.MustParse("20Gi")}
	gpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"),
		corev1.ResourcePods: resource.MustParse("5"), "nvidia.com/gpu": resource.MustParse("1")}

	var bigNC *karpv1.NodeClaim
	steps := []struct {
		name string
		act  func(t *testing.T)
		want map[corev1.ResourceName]string
	}{
		{
			name: "no nodeclaims",
			act:  func(*testing.T) {},
			want: map[corev1.ResourceName]string{"cpu": "0", "memory": "0", "pods": "0", "ephemeral-storage": "0", "nodes": "0"},
		},
		{
			name: "two launched, one launching, one of another pool",
			act: func(t *testing.T) {
				bigNC = launchedNodeClaim(t, np.Name, big)
				launchedNodeClaim(t, np.Name, gpu)
				launchedNodeClaim(t, np.Name, nil)
				launchedNodeClaim(t, "another-pool", big)
			},
			want: map[corev1.ResourceName]string{"cpu": "6", "memory": "12Gi", "pods": "15", "ephemeral-storage": "20Gi", "nvidia.com/gpu": "1", "nodes": "3"},
		},
		{
			name: "one deleted",
			act: func(t *testing.T) {
				if err := env.Client.Delete(t.Context(), bigNC); err != nil {
					t.Fatal(err)
				}
			},
			want: map[corev1.ResourceName]string{"cpu": "2", "memory": "4Gi", "pods": "5", "ephemeral-storage": "0", "nvidia.com/gpu": "1", "nodes": "2"},
		},
	}
	for _, step := range steps {
		step.act(t)
		nct.Eventually(t, 10*time.Second, step.name, func(ctx context.Context) error {
			if err := env.Get(ctx, np); err != nil {
				return err
			}
			return checkResources(np, step.want)
		})
	}
}

// setClassReady writes the LocalNodeClass's Ready condition; an empty status removes it.
func setClassReady(t *testing.T, class *joinerv1alpha1.LocalNodeClass, status metav1.ConditionStatus, message string) {
	t.Helper()
	class.Status.Conditions = nil
	if status != "" {
		class.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: status, Reason: "Test", Message: message, LastTransitionTime: metav1.Now()}}
	}
	if err := env.Client.Status().Update(t.Context(), class); err != nil {
		t.Fatal(err)
	}
}

func checkCondition(np *karpv1.NodePool, conditionType string, status metav1.ConditionStatus, reason, messagePart string) error {
	c := np.StatusCondition(conditionType)
	if c == nil {
		return fmt.Errorf("no %s condition", conditionType)
	}
	if c.Status != status || (reason != "" && c.Reason != reason) || !strings.Contains(c.Message, messagePart) {
		return fmt.Errorf("%s is %s/%s %q, want %s/%s containing %q", conditionType, c.Status, c.Reason, c.Message, status, reason, messagePart)
	}
	return nil
}

func TestNodePoolReadinessFollowsItsNodeClass(t *testing.T) {
	cases := []struct {
		name string
		ref  karpv1.NodeClassReference
		// class is the Ready status of a LocalNodeClass named like ref; "" with create creates one
		// that has not reported readiness.
		create      bool
		class       metav1.ConditionStatus
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string
	}{
		{name: "ready class", ref: localClassRef("ready"), create: true, class: metav1.ConditionTrue,
			wantStatus: metav1.ConditionTrue, wantReason: nodepool.ReasonNodeClassReady},
		{name: "class not ready", ref: localClassRef("broken"), create: true, class: metav1.ConditionFalse,
			wantStatus: metav1.ConditionFalse, wantReason: nodepool.ReasonNodeClassNotReady, wantMessage: "region xx-nowhere-1 is not in the catalog"},
		{name: "class without readiness yet", ref: localClassRef("new"), create: true,
			wantStatus: metav1.ConditionUnknown, wantReason: nodepool.ReasonNodeClassNotReady, wantMessage: "has not reported"},
		{name: "missing class", ref: localClassRef("missing"),
			wantStatus: metav1.ConditionFalse, wantReason: nodepool.ReasonNodeClassNotFound, wantMessage: "spec.template.spec.nodeClassRef: LocalNodeClass \"missing\" not found"},
		{name: "missing class of another served kind", ref: karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "missing"},
			wantStatus: metav1.ConditionFalse, wantReason: nodepool.ReasonNodeClassNotFound, wantMessage: "spec.template.spec.nodeClassRef"},
		{name: "kind the cluster does not serve", ref: karpv1.NodeClassReference{Group: "example.com", Kind: "MadeUpNodeClass", Name: "x"},
			wantStatus: metav1.ConditionFalse, wantReason: nodepool.ReasonNodeClassNotFound, wantMessage: "serves no kind MadeUpNodeClass in group example.com"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			startController(t)
			if tc.create {
				class := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: tc.ref.Name}}
				if err := env.Client.Create(t.Context(), class); err != nil {
					t.Fatal(err)
				}
				if tc.class != "" {
					setClassReady(t, class, tc.class, "region xx-nowhere-1 is not in the catalog")
				}
			}
			np := newNodePool(nct.Name("pool"), tc.ref)
			if err := env.Client.Create(t.Context(), np); err != nil {
				t.Fatal(err)
			}
			rootStatus := tc.wantStatus
			nct.Eventually(t, 10*time.Second, "nodepool readiness", func(ctx context.Context) error {
				if err := env.Get(ctx, np); err != nil {
					return err
				}
				return errors.Join(
					checkCondition(np, karpv1.ConditionTypeNodeClassReady, tc.wantStatus, tc.wantReason, tc.wantMessage),
					checkCondition(np, karpv1.ConditionTypeValidationSucceeded, metav1.ConditionTrue, "", ""),
					checkCondition(np, karpv1.ConditionTypeReady, rootStatus, "", ""))
			})
		})
	}
}

func TestNodePoolReadinessChangesWithTheClass(t *testing.T) {
	startController(t)
	np := newNodePool(nct.Name("pool"), localClassRef("later"))
	if err := env.Client.Create(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	class := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "later"}}
	steps := []struct {
		name       string
		act        func(t *testing.T)
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{name: "class missing", act: func(*testing.T) {}, wantStatus: metav1.ConditionFalse, wantReason: nodepool.ReasonNodeClassNotFound},
		{name: "class created ready", act: func(t *testing.T) {
			if err := env.Client.Create(t.Context(), class); err != nil {
				t.Fatal(err)
			}
			setClassReady(t, class, metav1.ConditionTrue, "")
		}, wantStatus: metav1.ConditionTrue, wantReason: nodepool.ReasonNodeClassReady},
		{name: "class turns not ready", act: func(t *testing.T) {
			setClassReady(t, class, metav1.ConditionFalse, "zones gone")
		}, wantStatus: metav1.ConditionFalse, wantReason: nodepool.ReasonNodeClassNotReady},
		{name: "class deleted", act: func(t *testing.T) {
			if err := env.Client.Delete(t.Context(), class); err != nil {
				t.Fatal(err)
			}
		}, wantStatus: metav1.ConditionFalse, wantReason: nodepool.ReasonNodeClassNotFound},
	}
	for _, step := range steps {
		step.act(t)
		nct.Eventually(t, 10*time.Second, step.name, func(ctx context.Context) error {
			if err := env.Get(ctx, np); err != nil {
				return err
			}
			return errors.Join(checkCondition(np, karpv1.ConditionTypeNodeClassReady, step.wantStatus, step.wantReason, ""),
				checkCondition(np, karpv1.ConditionTypeReady, step.wantStatus, "", ""))
		})
	}
}
