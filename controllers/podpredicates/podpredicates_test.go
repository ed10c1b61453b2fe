package podpredicates

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// ownerRef returns an owner reference of the kind; controller says whether it is the pod's
// controller.
func ownerRef(kind string, controller bool) metav1.OwnerReference {
	ref := metav1.OwnerReference{APIVersion: "apps/v1", Kind: kind, Name: "owner", UID: "u"}
	if controller {
		ref.Controller = ptr.To(true)
	}
	return ref
}

func withOwners(owners ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: owners}}
}

func inPhase(phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: phase}}
}

func TestIsDaemonSetPod(t *testing.T) {
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{name: "no owner", pod: withOwners(), want: false},
		{name: "controlled by a DaemonSet", pod: withOwners(ownerRef("DaemonSet", true)), want: true},
		{name: "controlled by a ReplicaSet", pod: withOwners(ownerRef("ReplicaSet", true)), want: false},
		{name: "owned but not controlled by a DaemonSet", pod: withOwners(ownerRef("DaemonSet", false)), want: false},
		{name: "DaemonSet controller after another owner", pod: withOwners(ownerRef("DaemonSet", false), ownerRef("DaemonSet", true)), want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsDaemonSetPod(tc.pod); got != tc.want {
				t.Errorf("IsDaemonSetPod = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsMirrorPod(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		want        bool
	}{
		{name: "no annotations", want: false},
		{name: "other annotation", annotations: map[string]string{"a": "b"}, want: false},
		{name: "mirror annotation", annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}, want: true},
		{name: "empty mirror annotation", annotations: map[string]string{corev1.MirrorPodAnnotationKey: ""}, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations}}
			if got := IsMirrorPod(pod); got != tc.want {
				t.Errorf("IsMirrorPod = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsTerminal(t *testing.T) {
	cases := []struct {
		phase corev1.PodPhase
		want  bool
	}{
		{phase: "", want: false},
		{phase: corev1.PodPending, want: false},
		{phase: corev1.PodRunning, want: false},
		{phase: corev1.PodUnknown, want: false},
		{phase: corev1.PodSucceeded, want: true},
		{phase: corev1.PodFailed, want: true},
	}
	for _, tc := range cases {
		t.Run(string(tc.phase), func(t *testing.T) {
			if got := IsTerminal(inPhase(tc.phase)); got != tc.want {
				t.Errorf("IsTerminal(%q) = %v, want %v", tc.phase, got, tc.want)
			}
		})
	}
}

func TestIsCritical(t *testing.T) {
	cases := []struct {
		priorityClass string
		want          bool
	}{
		{priorityClass: "", want: false},
		{priorityClass: "high", want: false},
		{priorityClass: SystemClusterCritical, want: true},
		{priorityClass: SystemNodeCritical, want: true},
	}
	for _, tc := range cases {
		t.Run(tc.priorityClass, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{PriorityClassName: tc.priorityClass}}
			if got := IsCritical(pod); got != tc.want {
				t.Errorf("IsCritical(%q) = %v, want %v", tc.priorityClass, got, tc.want)
			}
		})
	}
}

func TestDoNotDisruptActive(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	started := func(ago time.Duration) *metav1.Time { return &metav1.Time{Time: now.Add(-ago)} }
	cases := []struct {
		name  string
		value *string
		start *metav1.Time
		want  bool
	}{
		{name: "no annotation", want: false},
		{name: "true", value: ptr.To("true"), start: started(time.Hour), want: true},
		{name: "false", value: ptr.To("false"), want: false},
		{name: "duration not yet elapsed", value: ptr.To("1h"), start: started(30 * time.Minute), want: true},
		{name: "duration elapsed", value: ptr.To("1h"), start: started(2 * time.Hour), want: false},
		{name: "duration of a pod that has not started", value: ptr.To("1h"), want: true},
		{name: "zero duration", value: ptr.To("0s"), want: false},
		{name: "negative duration", value: ptr.To("-1h"), want: false},
		{name: "garbage", value: ptr.To("soon"), want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Status: corev1.PodStatus{StartTime: tc.start}}
			if tc.value != nil {
				pod.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: *tc.value}
			}
			if got := DoNotDisruptActive(pod, now); got != tc.want {
				t.Errorf("DoNotDisruptActive = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestToleratesDisruptedTaint(t *testing.T) {
	cases := []struct {
		name        string
		tolerations []corev1.Toleration
		want        bool
	}{
		{name: "no tolerations", want: false},
		{name: "disrupted key exists", tolerations: []corev1.Toleration{{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists}}, want: true},
		{name: "everything", tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, want: true},
		{
			name:        "disrupted key, NoSchedule effect",
			tolerations: []corev1.Toleration{{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			want:        true,
		},
		{
			name:        "disrupted key, NoExecute effect only",
			tolerations: []corev1.Toleration{{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			want:        false,
		},
		{name: "another key", tolerations: []corev1.Toleration{{Key: "example.com/other", Operator: corev1.TolerationOpExists}}, want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{Tolerations: tc.tolerations}}
			if got := ToleratesDisruptedTaint(pod); got != tc.want {
				t.Errorf("ToleratesDisruptedTaint = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestGracePeriod(t *testing.T) {
	cases := []struct {
		name    string
		seconds *int64
		want    time.Duration
	}{
		{name: "unset is the Kubernetes default", want: 30 * time.Second},
		{name: "zero", seconds: ptr.To[int64](0), want: 0},
		{name: "two minutes", seconds: ptr.To[int64](120), want: 2 * time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: tc.seconds}}
			if got := GracePeriod(pod); got != tc.want {
				t.Errorf("GracePeriod = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestIsProvisionable(t *testing.T) {
	unschedulable := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	pending := func(mutate func(*corev1.Pod)) *corev1.Pod {
		pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{unschedulable}}}
		if mutate != nil {
			mutate(pod)
		}
		return pod
	}
	cases := []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{name: "pending and unschedulable", pod: pending(nil), want: true},
		{name: "bound", pod: pending(func(p *corev1.Pod) { p.Spec.NodeName = "n" }), want: false},
		{name: "nominated", pod: pending(func(p *corev1.Pod) { p.Status.NominatedNodeName = "n" }), want: false},
		{name: "being deleted", pod: pending(func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }), want: false},
		{name: "succeeded", pod: pending(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), want: false},
		{name: "failed", pod: pending(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), want: false},
		{name: "daemonset pod", pod: pending(func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{ownerRef("DaemonSet", true)} }), want: false},
		{name: "replicaset pod", pod: pending(func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{ownerRef("ReplicaSet", true)} }), want: true},
		{name: "not yet seen by the scheduler", pod: pending(func(p *corev1.Pod) { p.Status.Conditions = nil }), want: false},
		{
			name: "scheduled condition false for another reason",
			pod: pending(func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}}
			}),
			want: false,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsProvisionable(tc.pod); got != tc.want {
				t.Errorf("IsProvisionable = %v, want %v", got, tc.want)
			}
		})
	}
}
