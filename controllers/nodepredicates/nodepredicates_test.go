package nodepredicates

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestNodeReady(t *testing.T) {
	cases := []struct {
		name       string
		conditions []corev1.NodeCondition
		want       bool
	}{
		{name: "no conditions", want: false},
		{name: "ready", conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, want: true},
		{name: "not ready", conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}, want: false},
		{name: "unknown", conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}, want: false},
		{
			name: "other conditions true, ready missing",
			conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionTrue},
			},
			want: false,
		},
		{
			name: "ready among others",
			conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			},
			want: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := &corev1.Node{Status: corev1.NodeStatus{Conditions: tc.conditions}}
			if got := NodeReady(node); got != tc.want {
				t.Errorf("NodeReady = %v, want %v", got, tc.want)
			}
		})
	}
}
