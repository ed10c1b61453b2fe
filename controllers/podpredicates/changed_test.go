package podpredicates

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// runningPod is a bound, Running pod as the kubelet reports it.
func runningPod() *corev1.Pod {
	at := metav1.NewTime(time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "p", ResourceVersion: "7", Labels: map[string]string{"app": "inflate"}},
		Spec: corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &at, PodIP: "10.0.0.2",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true}},
		},
	}
}

func TestChanged(t *testing.T) {
	later := metav1.NewTime(time.Date(2026, 3, 14, 15, 24, 26, 0, time.UTC))
	cases := []struct {
		name   string
		update func(p *corev1.Pod)
		want   bool
	}{
		{name: "resourceVersion and managedFields", update: func(p *corev1.Pod) {
			p.ResourceVersion = "8"
			p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
		}},
		{name: "condition probe time", update: func(p *corev1.Pod) { p.Status.Conditions[1].LastProbeTime = later }},
		{name: "condition message", update: func(p *corev1.Pod) { p.Status.Conditions[1].Message = "probe ok" }},
		{name: "container restart", update: func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = 3 }},
		{name: "pod IPs", update: func(p *corev1.Pod) { p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.2"}} }},
		{name: "bound", want: true, update: func(p *corev1.Pod) { p.Spec.NodeName = "m" }},
		{name: "phase", want: true, update: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }},
		{name: "not ready", want: true, update: func(p *corev1.Pod) { p.Status.Conditions[1].Status = corev1.ConditionFalse }},
		{name: "unschedulable", want: true, update: func(p *corev1.Pod) {
			p.Status.Conditions[0].Status, p.Status.Conditions[0].Reason = corev1.ConditionFalse, corev1.PodReasonUnschedulable
		}},
		{name: "condition added", want: true, update: func(p *corev1.Pod) {
			p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue})
		}},
		{name: "nominated", want: true, update: func(p *corev1.Pod) { p.Status.NominatedNodeName = "m" }},
		{name: "started", want: true, update: func(p *corev1.Pod) { p.Status.StartTime = &later }},
		{name: "deleting", want: true, update: func(p *corev1.Pod) { p.DeletionTimestamp = &later }},
		{name: "do-not-disrupt annotation", want: true, update: func(p *corev1.Pod) {
			p.Annotations = map[string]string{"karpenter.sh/do-not-disrupt": "true"}
		}},
		{name: "label", want: true, update: func(p *corev1.Pod) { p.Labels["tier"] = "web" }},
		{name: "owner", want: true, update: func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs"}} }},
		{name: "finalizer", want: true, update: func(p *corev1.Pod) { p.Finalizers = []string{"example.com/f"} }},
		{name: "resized", want: true, update: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			oldPod := runningPod()
			newPod := oldPod.DeepCopy()
			tc.update(newPod)
			if got := Changed(oldPod, newPod); got != tc.want {
				t.Errorf("Changed = %v, want %v", got, tc.want)
			}
			if got := OnChange().Update(event.UpdateEvent{ObjectOld: oldPod, ObjectNew: newPod}); got != tc.want {
				t.Errorf("OnChange().Update = %v, want %v", got, tc.want)
			}
		})
	}
}
