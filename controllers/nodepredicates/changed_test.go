package nodepredicates

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// heartbeatNode is a Ready kwok-like Node as its heartbeat leaves it.
func heartbeatNode() *corev1.Node {
	at := metav1.NewTime(time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC))
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "10", Labels: map[string]string{"karpenter.sh/nodepool": "default"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec: corev1.NodeSpec{ProviderID: "local:///i-1"},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1900m")},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: at, LastTransitionTime: at},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: at, LastTransitionTime: at},
			},
		},
	}
}

func TestChanged(t *testing.T) {
	later := metav1.NewTime(time.Date(2026, 3, 14, 15, 24, 26, 0, time.UTC))
	cases := []struct {
		name   string
		update func(n *corev1.Node)
		want   bool
	}{
		{name: "heartbeat", update: func(n *corev1.Node) {
			for i := range n.Status.Conditions {
				n.Status.Conditions[i].LastHeartbeatTime = later
			}
		}},
		{name: "resourceVersion and managedFields", update: func(n *corev1.Node) {
			n.ResourceVersion = "11"
			n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kwok", Operation: metav1.ManagedFieldsOperationUpdate}}
		}},
		{name: "images, addresses and node info", update: func(n *corev1.Node) {
			n.Status.Images = []corev1.ContainerImage{{Names: []string{"pause"}}}
			n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
			n.Status.NodeInfo.KubeletVersion = "v1.34.0"
		}},
		{name: "conditions reordered", update: func(n *corev1.Node) {
			c := n.Status.Conditions
			c[0], c[1] = c[1], c[0]
		}},
		{name: "not ready", want: true, update: func(n *corev1.Node) {
			n.Status.Conditions[0].Status, n.Status.Conditions[0].LastTransitionTime = corev1.ConditionFalse, later
		}},
		{name: "condition reason", want: true, update: func(n *corev1.Node) { n.Status.Conditions[1].Reason = "KubeletHasInsufficientMemory" }},
		{name: "condition added", want: true, update: func(n *corev1.Node) {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "KernelDeadlock", Status: corev1.ConditionTrue})
		}},
		{name: "condition replaced by another type", want: true, update: func(n *corev1.Node) { n.Status.Conditions[1].Type = corev1.NodeDiskPressure }},
		{name: "label", want: true, update: func(n *corev1.Node) { n.Labels["karpenter.sh/initialized"] = "true" }},
		{name: "annotation", want: true, update: func(n *corev1.Node) { n.Annotations["karpenter.sh/do-not-disrupt"] = "true" }},
		{name: "finalizer", want: true, update: func(n *corev1.Node) { n.Finalizers = []string{"karpenter.sh/termination"} }},
		{name: "owner reference", want: true, update: func(n *corev1.Node) { n.OwnerReferences = []metav1.OwnerReference{{Kind: "NodeClaim", Name: "nc"}} }},
		{name: "deletion", want: true, update: func(n *corev1.Node) { n.DeletionTimestamp = &later }},
		{name: "taint", want: true, update: func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}}
		}},
		{name: "provider ID", want: true, update: func(n *corev1.Node) { n.Spec.ProviderID = "local:///i-2" }},
		{name: "allocatable", want: true, update: func(n *corev1.Node) {
			n.Status.Allocatable[corev1.ResourcePods] = resource.MustParse("110")
		}},
		{name: "capacity", want: true, update: func(n *corev1.Node) { n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("4") }},
		{name: "same quantity spelled differently", update: func(n *corev1.Node) {
			n.Status.Allocatable[corev1.ResourceCPU] = resource.MustParse("1.9")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oldNode := heartbeatNode()
			newNode := oldNode.DeepCopy()
			tc.update(newNode)
			if got := Changed(oldNode, newNode); got != tc.want {
				t.Errorf("Changed = %v, want %v", got, tc.want)
			}
			if got := OnChange().Update(event.UpdateEvent{ObjectOld: oldNode, ObjectNew: newNode}); got != tc.want {
				t.Errorf("OnChange().Update = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestOnChangeOtherEvents: creates, deletes and generic events always pass, and so does an update
// of objects that are not Nodes.
func TestOnChangeOtherEvents(t *testing.T) {
	p, n := OnChange(), heartbeatNode()
	cases := []struct {
		name string
		pass bool
	}{
		{name: "create", pass: p.Create(event.CreateEvent{Object: n})},
		{name: "delete", pass: p.Delete(event.DeleteEvent{Object: n})},
		{name: "generic", pass: p.Generic(event.GenericEvent{Object: n})},
		{name: "update of a pod", pass: p.Update(event.UpdateEvent{ObjectOld: &corev1.Pod{}, ObjectNew: &corev1.Pod{}})},
	}
	for _, tc := range cases {
		if !tc.pass {
			t.Errorf("%s: filtered out, want it to pass", tc.name)
		}
	}
}
