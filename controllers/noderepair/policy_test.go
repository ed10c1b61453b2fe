package noderepair

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/joiner-dev/joiner/cloudprovider"
)

func TestRepairAllowed(t *testing.T) {
	tests := []struct {
		unhealthy, total int
		wantMax          int
		want             bool
	}{
		{unhealthy: 1, total: 1, wantMax: 1, want: true},
		{unhealthy: 1, total: 3, wantMax: 1, want: true}, // Karpenter's example: 1 of 3 passes
		{unhealthy: 1, total: 5, wantMax: 1, want: true},
		{unhealthy: 2, total: 5, wantMax: 1, want: false},
		{unhealthy: 3, total: 5, wantMax: 1, want: false},
		{unhealthy: 2, total: 6, wantMax: 2, want: true}, // 1.2 rounds up
		{unhealthy: 2, total: 10, wantMax: 2, want: true},
		{unhealthy: 3, total: 10, wantMax: 2, want: false},
		{unhealthy: 3, total: 15, wantMax: 3, want: true}, // exactly 3: no float rounding up to 4
		{unhealthy: 4, total: 15, wantMax: 3, want: false},
		{unhealthy: 20, total: 100, wantMax: 20, want: true},
		{unhealthy: 21, total: 100, wantMax: 20, want: false},
		{unhealthy: 21, total: 101, wantMax: 21, want: true},
		{unhealthy: 0, total: 0, wantMax: 0, want: true},
	}
	for _, tt := range tests {
		if got := maxUnhealthy(tt.total); got != tt.wantMax {
			t.Errorf("maxUnhealthy(%d) = %d, want %d", tt.total, got, tt.wantMax)
		}
		if got := repairAllowed(tt.unhealthy, tt.total); got != tt.want {
			t.Errorf("repairAllowed(%d of %d) = %t, want %t", tt.unhealthy, tt.total, got, tt.want)
		}
	}
}

func cond(typ corev1.NodeConditionType, status corev1.ConditionStatus, since time.Time) corev1.NodeCondition {
	return corev1.NodeCondition{Type: typ, Status: status, LastTransitionTime: metav1.NewTime(since)}
}

func TestFirstMatch(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	aws := append(cloudprovider.ReadyRepairPolicies(),
		cloudprovider.RepairPolicy{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 10 * time.Minute},
		cloudprovider.RepairPolicy{ConditionType: "KernelReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
	)
	tests := []struct {
		name         string
		conditions   []corev1.NodeCondition
		policies     []cloudprovider.RepairPolicy
		wantMatch    bool
		wantType     corev1.NodeConditionType
		wantDeadline time.Time
	}{
		{name: "ready node", conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionTrue, t0)}, policies: aws},
		{name: "no conditions", policies: aws},
		{name: "ready unknown", conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown, t0)}, policies: aws,
			wantMatch: true, wantType: corev1.NodeReady, wantDeadline: t0.Add(30 * time.Minute)},
		{name: "ready false", conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionFalse, t0)}, policies: aws,
			wantMatch: true, wantType: corev1.NodeReady, wantDeadline: t0.Add(30 * time.Minute)},
		{name: "a condition's healthy status does not match", conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, t0), cond("KernelReady", corev1.ConditionTrue, t0)}, policies: aws},
		{name: "a condition no policy names", conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, t0), cond(corev1.NodeMemoryPressure, corev1.ConditionTrue, t0)}, policies: aws},
		{name: "the shorter toleration ends first although it began later", conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionFalse, t0), cond("AcceleratedHardwareReady", corev1.ConditionFalse, t0.Add(5*time.Minute))}, policies: aws,
			wantMatch: true, wantType: "AcceleratedHardwareReady", wantDeadline: t0.Add(15 * time.Minute)},
		{name: "the earlier transition ends first with equal tolerations", conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionFalse, t0.Add(time.Hour)), cond("KernelReady", corev1.ConditionFalse, t0)}, policies: aws,
			wantMatch: true, wantType: "KernelReady", wantDeadline: t0.Add(30 * time.Minute)},
		{name: "a provider without the condition's policy", conditions: []corev1.NodeCondition{
			cond(corev1.NodeReady, corev1.ConditionTrue, t0), cond("KernelReady", corev1.ConditionFalse, t0)}, policies: cloudprovider.ReadyRepairPolicies()},
		{name: "the toleration override", conditions: []corev1.NodeCondition{cond(corev1.NodeReady, corev1.ConditionUnknown, t0)},
			policies: withToleration(aws, 20*time.Second), wantMatch: true, wantType: corev1.NodeReady, wantDeadline: t0.Add(20 * time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := &corev1.Node{Status: corev1.NodeStatus{Conditions: tt.conditions}}
			m, ok := firstMatch(node, tt.policies)
			if ok != tt.wantMatch || unhealthy(node, tt.policies) != tt.wantMatch {
				t.Fatalf("match = %t, want %t", ok, tt.wantMatch)
			}
			if !ok {
				return
			}
			if m.policy.ConditionType != tt.wantType || !m.deadline.Equal(tt.wantDeadline) {
				t.Errorf("matched %s until %s, want %s until %s", m.policy.ConditionType, m.deadline, tt.wantType, tt.wantDeadline)
			}
			if s := m.String(); !strings.Contains(s, string(tt.wantType)) || !strings.Contains(s, "since") {
				t.Errorf("String() = %q, want the condition and since when", s)
			}
		})
	}
}

func TestWithTolerationLeavesTheProvidersPoliciesAlone(t *testing.T) {
	in := cloudprovider.ReadyRepairPolicies()
	out := withToleration(in, time.Second)
	if in[0].TolerationDuration != 30*time.Minute || out[0].TolerationDuration != time.Second {
		t.Errorf("in %v, out %v: want the input unchanged and the output overridden", in, out)
	}
	if got := withToleration(in, 0); got[1].TolerationDuration != 30*time.Minute {
		t.Errorf("zero override changed the toleration to %s", got[1].TolerationDuration)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		p       cloudprovider.RepairPolicy
		wantErr string
	}{
		{name: "valid", p: cloudprovider.RepairPolicy{ConditionType: "Ready", ConditionStatus: "False", TolerationDuration: time.Minute}},
		{name: "zero toleration is valid", p: cloudprovider.RepairPolicy{ConditionType: "Ready", ConditionStatus: "False"}},
		{name: "no type", p: cloudprovider.RepairPolicy{ConditionStatus: "False"}, wantErr: "conditionType is empty"},
		{name: "no status", p: cloudprovider.RepairPolicy{ConditionType: "Ready"}, wantErr: "(Ready): conditionStatus is empty"},
		{name: "negative", p: cloudprovider.RepairPolicy{ConditionType: "Ready", ConditionStatus: "False", TolerationDuration: -time.Second},
			wantErr: "tolerationDuration -1s is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := validate([]cloudprovider.RepairPolicy{tt.p})
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("validate: %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestSnakeCase(t *testing.T) {
	for in, want := range map[string]string{
		"Ready": "ready", "AcceleratedHardwareReady": "accelerated_hardware_ready", "KernelReady": "kernel_ready",
		"ContainerRuntimeReady": "container_runtime_ready", "GPUReady": "gpu_ready", "NetworkUnavailable": "network_unavailable",
	} {
		if got := snakeCase(in); got != want {
			t.Errorf("snakeCase(%q) = %q, want %q", in, got, want)
		}
	}
}
