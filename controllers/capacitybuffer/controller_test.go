package capacitybuffer_test

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
	"github.com/joiner-dev/joiner/controllers/capacitybuffer"
)

var testNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func podTemplateSpec(cpu string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
	}
}

func selector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
}

// workloads returns one of each object a buffer can refer to, in namespace ns.
func workloads(ns string) map[string]client.Object {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }
	return map[string]client.Object{
		"template": &corev1.PodTemplate{ObjectMeta: meta("unit"), Template: podTemplateSpec("500m")},
		"deployment": &appsv1.Deployment{ObjectMeta: meta("web"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](10),
			Selector: selector(), Template: podTemplateSpec("1")}},
		"statefulset": &appsv1.StatefulSet{ObjectMeta: meta("db"), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3),
			Selector: selector(), Template: podTemplateSpec("2")}},
		"replicaset": &appsv1.ReplicaSet{ObjectMeta: meta("rs"), Spec: appsv1.ReplicaSetSpec{
			Selector: selector(), Template: podTemplateSpec("250m")}},
	}
}

// TestResolution runs the controller's reconcile against a real apiserver for every way a buffer
// names its unit, and checks the status it writes.
func TestResolution(t *testing.T) {
	ref := func(kind, name string) *autoscalingv1beta1.ScalableRef {
		return &autoscalingv1beta1.ScalableRef{APIGroup: "apps", Kind: kind, Name: name}
	}
	cpuLimit := autoscalingv1beta1.ResourceList{"cpu": resource.MustParse("2")}
	tests := []struct {
		name         string
		spec         autoscalingv1beta1.CapacityBufferSpec
		wantReplicas *int32
		wantReady    metav1.ConditionStatus
		wantReason   string
		wantMessage  string
		wantProv     string
		wantTemplate string
	}{
		{name: "podTemplateRef", spec: autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "unit"}, Replicas: ptr.To[int32](3)},
			wantReplicas: ptr.To[int32](3), wantReady: metav1.ConditionTrue, wantReason: autoscalingv1beta1.ReasonResolved, wantMessage: "3 units of",
			wantProv: autoscalingv1beta1.ReasonRequiresNewCapacity, wantTemplate: "unit"},
		{name: "podTemplateRef capped by limits", spec: autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "unit"}, Replicas: ptr.To[int32](9), Limits: &cpuLimit},
			wantReplicas: ptr.To[int32](4), wantReady: metav1.ConditionTrue, wantReason: autoscalingv1beta1.ReasonResolved, wantProv: autoscalingv1beta1.ReasonRequiresNewCapacity, wantTemplate: "unit"},
		{name: "missing PodTemplate", spec: autoscalingv1beta1.CapacityBufferSpec{PodTemplateRef: &autoscalingv1beta1.LocalObjectRef{Name: "nope"}, Replicas: ptr.To[int32](1)},
			wantReady: metav1.ConditionFalse, wantReason: autoscalingv1beta1.ReasonPodTemplateNotFound, wantMessage: "spec.podTemplateRef.name: PodTemplate",
			wantProv: autoscalingv1beta1.ReasonNotReadyForProvisioning},
		{name: "Deployment percentage", spec: autoscalingv1beta1.CapacityBufferSpec{ScalableRef: ref("Deployment", "web"), Percentage: ptr.To[int32](25)},
			wantReplicas: ptr.To[int32](3), wantReady: metav1.ConditionTrue, wantReason: autoscalingv1beta1.ReasonResolved, wantProv: autoscalingv1beta1.ReasonRequiresNewCapacity},
		{name: "StatefulSet replicas", spec: autoscalingv1beta1.CapacityBufferSpec{ScalableRef: ref("StatefulSet", "db"), Replicas: ptr.To[int32](2)},
			wantReplicas: ptr.To[int32](2), wantReady: metav1.ConditionTrue, wantReason: autoscalingv1beta1.ReasonResolved, wantMessage: "2 units of cpu 2",
			wantProv: autoscalingv1beta1.ReasonRequiresNewCapacity},
		{name: "ReplicaSet with unset replicas counts one", spec: autoscalingv1beta1.CapacityBufferSpec{ScalableRef: ref("ReplicaSet", "rs"), Percentage: ptr.To[int32](100)},
			wantReplicas: ptr.To[int32](1), wantReady: metav1.ConditionTrue, wantReason: autoscalingv1beta1.ReasonResolved, wantProv: autoscalingv1beta1.ReasonRequiresNewCapacity},
		{name: "zero replicas is an empty buffer", spec: autoscalingv1beta1.CapacityBufferSpec{ScalableRef: ref("Deployment", "web"), Replicas: ptr.To[int32](0)},
			wantReplicas: ptr.To[int32](0), wantReady: metav1.ConditionTrue, wantReason: autoscalingv1beta1.ReasonResolved, wantProv: autoscalingv1beta1.ReasonBufferEmpty},
		{name: "missing Deployment", spec: autoscalingv1beta1.CapacityBufferSpec{ScalableRef: ref("Deployment", "gone"), Replicas: ptr.To[int32](1)},
			wantReady: metav1.ConditionFalse, wantReason: autoscalingv1beta1.ReasonScalableRefNotFound, wantMessage: "spec.scalableRef: Deployment", wantProv: autoscalingv1beta1.ReasonNotReadyForProvisioning},
		{name: "unsupported kind", spec: autoscalingv1beta1.CapacityBufferSpec{ScalableRef: ref("DaemonSet", "x"), Replicas: ptr.To[int32](1)},
			wantReady: metav1.ConditionFalse, wantReason: autoscalingv1beta1.ReasonResolutionFailed, wantMessage: `spec.scalableRef.kind "DaemonSet" is not supported`,
			wantProv: autoscalingv1beta1.ReasonNotReadyForProvisioning},
		{name: "unsupported group", spec: autoscalingv1beta1.CapacityBufferSpec{ScalableRef: &autoscalingv1beta1.ScalableRef{APIGroup: "example.com", Kind: "Deployment", Name: "web"}, Replicas: ptr.To[int32](1)},
			wantReady: metav1.ConditionFalse, wantReason: autoscalingv1beta1.ReasonResolutionFailed, wantMessage: `spec.scalableRef.apiGroup "example.com"`,
			wantProv: autoscalingv1beta1.ReasonNotReadyForProvisioning},
		{name: "no count", spec: autoscalingv1beta1.CapacityBufferSpec{ScalableRef: ref("Deployment", "web")},
			wantReady: metav1.ConditionFalse, wantReason: autoscalingv1beta1.ReasonResolutionFailed, wantMessage: "set spec.replicas, spec.percentage",
			wantProv: autoscalingv1beta1.ReasonNotReadyForProvisioning},
		{name: "other strategy", spec: autoscalingv1beta1.CapacityBufferSpec{ProvisioningStrategy: ptr.To("example.com/passive"), ScalableRef: ref("Deployment", "web"), Replicas: ptr.To[int32](1)},
			wantReady: metav1.ConditionFalse, wantReason: autoscalingv1beta1.ReasonResolutionFailed, wantMessage: `spec.provisioningStrategy "example.com/passive" is not served`,
			wantProv: autoscalingv1beta1.ReasonNotReadyForProvisioning},
	}
	ns := env.Namespace(t)
	ctx := context.Background()
	for _, obj := range workloads(ns) {
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T: %v", obj, err)
		}
	}
	ctrl := capacitybuffer.NewController(env.Client, clocktesting.NewFakeClock(testNow))
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cb := &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "cb-" + string(rune('a'+i)), Namespace: ns}, Spec: tt.spec}
			if err := env.Client.Create(ctx, cb); err != nil {
				t.Fatalf("create CapacityBuffer: %v", err)
			}
			res, err := ctrl.Reconciler().Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: cb.Name}})
			if err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if res.RequeueAfter != capacitybuffer.Requeue {
				t.Errorf("requeue after %s, want %s", res.RequeueAfter, capacitybuffer.Requeue)
			}
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(cb), cb); err != nil {
				t.Fatal(err)
			}
			checkStatus(t, cb, tt.wantReplicas, tt.wantReady, tt.wantReason, tt.wantMessage, tt.wantProv, tt.wantTemplate)
		})
	}
}

func checkStatus(t *testing.T, cb *autoscalingv1beta1.CapacityBuffer, replicas *int32, ready metav1.ConditionStatus, reason, message, prov, template string) {
	t.Helper()
	st := cb.Status
	if (st.Replicas == nil) != (replicas == nil) || (replicas != nil && *st.Replicas != *replicas) {
		t.Errorf("status.replicas = %v, want %v", ptr.Deref(st.Replicas, -1), ptr.Deref(replicas, -1))
	}
	c := meta.FindStatusCondition(st.Conditions, autoscalingv1beta1.ConditionTypeReadyForProvisioning)
	if c == nil || c.Status != ready || c.Reason != reason || !strings.Contains(c.Message, message) {
		t.Errorf("ReadyForProvisioning = %+v, want %s/%s containing %q", c, ready, reason, message)
	}
	if c != nil && !c.LastTransitionTime.Time.Equal(testNow) {
		t.Errorf("ReadyForProvisioning transitioned at %s, want the controller's clock %s", c.LastTransitionTime, testNow)
	}
	if p := meta.FindStatusCondition(st.Conditions, autoscalingv1beta1.ConditionTypeProvisioning); p == nil || p.Reason != prov {
		t.Errorf("Provisioning = %+v, want reason %s", p, prov)
	}
	if got := ptr.Deref(st.ProvisioningStrategy, ""); got == "" {
		t.Errorf("status.provisioningStrategy is empty")
	}
	gotTemplate := ""
	if st.PodTemplateRef != nil {
		gotTemplate = st.PodTemplateRef.Name
	}
	if gotTemplate != template {
		t.Errorf("status.podTemplateRef = %q, want %q", gotTemplate, template)
	}
}
