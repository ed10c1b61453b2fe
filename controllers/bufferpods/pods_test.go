package bufferpods

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

func testBuffer(name string) *autoscalingv1beta1.CapacityBuffer {
	return &autoscalingv1beta1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team", UID: types.UID("uid-" + name)}}
}

func TestVirtualPod(t *testing.T) {
	template := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"keep": "me"},
			OwnerReferences: []metav1.OwnerReference{{Name: "owner"}}},
		Spec: corev1.PodSpec{NodeName: "somewhere", Containers: []corev1.Container{{Name: "app"}}},
	}
	pod := VirtualPod(testBuffer("web"), template, 2)
	checks := map[string]bool{
		"name":               pod.Name == "web-buffer-2",
		"namespace":          pod.Namespace == "team",
		"uid":                pod.UID == "capacitybuffer-uid-web-2",
		"labels kept":        pod.Labels["app"] == "web",
		"annotations kept":   pod.Annotations["keep"] == "me",
		"fake-pod":           podpredicates.IsCapacityBufferPod(pod),
		"buffer name":        pod.Annotations[autoscalingv1beta1.BufferNameAnnotationKey] == "web",
		"buffer namespace":   pod.Annotations[autoscalingv1beta1.BufferNamespaceAnnotationKey] == "team",
		"unbound":            pod.Spec.NodeName == "",
		"pending":            pod.Status.Phase == corev1.PodPending,
		"no owners":          len(pod.OwnerReferences) == 0,
		"template untouched": template.Spec.NodeName == "somewhere" && len(template.Annotations) == 1,
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("%s: got %+v", what, pod)
		}
	}
}

func TestSettle(t *testing.T) {
	real := func(name string) *corev1.Pod { return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}} }
	unit := func(buffer string, n int) *corev1.Pod {
		return VirtualPod(testBuffer(buffer), &corev1.PodTemplateSpec{}, n)
	}
	node := &scheduling.ExistingNode{Name: "n1"}
	results := &scheduling.Results{
		ExistingNodes: []scheduling.ExistingNodePlacement{
			{Node: node, Pods: []*corev1.Pod{real("a"), unit("x", 0)}},
			{Node: &scheduling.ExistingNode{Name: "n2"}, Pods: []*corev1.Pod{unit("x", 1)}},
		},
		NewNodeClaims: []*scheduling.NodeClaimPlan{
			{Hostname: "only-units", Pods: []*corev1.Pod{unit("y", 0), unit("y", 1)}},
			{Hostname: "mixed", Pods: []*corev1.Pod{real("b"), unit("x", 2)}},
		},
		PodErrors: []scheduling.PodError{{Pod: real("c"), Err: errors.New("too big")}, {Pod: unit("y", 2), Err: errors.New("limit reached")}},
	}
	out, outcomes := Settle(results)
	for _, pl := range out.ExistingNodes {
		for _, p := range pl.Pods {
			if podpredicates.IsCapacityBufferPod(p) {
				t.Errorf("virtual pod %s left on %s", p.Name, pl.Node.Name)
			}
		}
	}
	if len(out.ExistingNodes) != 1 || out.ExistingNodes[0].Node != node || len(out.ExistingNodes[0].Pods) != 1 {
		t.Errorf("existing placements %+v, want only n1 with pod a", out.ExistingNodes)
	}
	if len(out.NewNodeClaims) != 2 || len(out.NewNodeClaims[0].Pods) != 0 || len(out.NewNodeClaims[1].Pods) != 1 || out.NewNodeClaims[1].Pods[0].Name != "b" {
		t.Errorf("new NodeClaims %+v, want both kept, the first without pods, the second with b", out.NewNodeClaims)
	}
	if len(results.NewNodeClaims[0].Pods) != 2 {
		t.Errorf("Settle changed its input's plans")
	}
	if len(out.PodErrors) != 1 || out.PodErrors[0].Pod.Name != "c" {
		t.Errorf("pod errors %+v, want only c", out.PodErrors)
	}
	want := map[string]Outcome{"team/x": {Existing: 2, New: 1}, "team/y": {New: 2, Failed: 1, Err: "limit reached"}}
	for k, w := range want {
		if got := outcomes[k]; got == nil || *got != w {
			t.Errorf("outcome of %s = %+v, want %+v", k, got, w)
		}
	}
}
