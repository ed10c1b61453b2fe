package capacitybuffer

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
)

func TestReplicas(t *testing.T) {
	unit := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	limits := func(kv ...string) *autoscalingv1beta1.ResourceList {
		rl := autoscalingv1beta1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			rl[autoscalingv1beta1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return &rl
	}
	tests := []struct {
		name     string
		spec     autoscalingv1beta1.CapacityBufferSpec
		scalable *int32
		unit     corev1.ResourceList
		want     int32
		wantErr  string
	}{
		{name: "replicas alone", spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](3)}, unit: unit, want: 3},
		{name: "zero replicas", spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](0)}, unit: unit, want: 0},
		{name: "percentage rounds up", spec: autoscalingv1beta1.CapacityBufferSpec{Percentage: ptr.To[int32](20)}, scalable: ptr.To[int32](11), unit: unit, want: 3},
		{name: "percentage exact", spec: autoscalingv1beta1.CapacityBufferSpec{Percentage: ptr.To[int32](20)}, scalable: ptr.To[int32](10), unit: unit, want: 2},
		{name: "percentage at least one unit", spec: autoscalingv1beta1.CapacityBufferSpec{Percentage: ptr.To[int32](1)}, scalable: ptr.To[int32](3), unit: unit, want: 1},
		{name: "percentage of zero replicas", spec: autoscalingv1beta1.CapacityBufferSpec{Percentage: ptr.To[int32](50)}, scalable: ptr.To[int32](0), unit: unit, want: 0},
		{name: "larger of replicas and percentage (percentage)", spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](2), Percentage: ptr.To[int32](50)},
			scalable: ptr.To[int32](10), unit: unit, want: 5},
		{name: "larger of replicas and percentage (replicas)", spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](7), Percentage: ptr.To[int32](50)},
			scalable: ptr.To[int32](10), unit: unit, want: 7},
		{name: "percentage without scalable counts nothing", spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](2), Percentage: ptr.To[int32](500)},
			unit: unit, want: 2},
		{name: "limits cap replicas by cpu", spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](10), Limits: limits("cpu", "2")}, unit: unit, want: 4},
		{name: "limits cap by the tightest resource", spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](10), Limits: limits("cpu", "4", "memory", "3Gi")},
			unit: unit, want: 3},
		{name: "limits above replicas do not raise them", spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](2), Limits: limits("cpu", "100")}, unit: unit, want: 2},
		{name: "limits alone fill them", spec: autoscalingv1beta1.CapacityBufferSpec{Limits: limits("cpu", "1750m")}, unit: unit, want: 3},
		{name: "limit on a resource the unit does not request bounds nothing", spec: autoscalingv1beta1.CapacityBufferSpec{Replicas: ptr.To[int32](4), Limits: limits("nvidia.com/gpu", "1")},
			unit: unit, want: 4},
		{name: "limits alone on resources not requested", spec: autoscalingv1beta1.CapacityBufferSpec{Limits: limits("nvidia.com/gpu", "1")}, unit: unit,
			wantErr: "spec.limits: the pod template requests none of the limited resources (nvidia.com/gpu)"},
		{name: "nothing set", spec: autoscalingv1beta1.CapacityBufferSpec{}, unit: unit, wantErr: "set spec.replicas, spec.percentage"},
		{name: "negative limit", spec: autoscalingv1beta1.CapacityBufferSpec{Limits: limits("cpu", "-1")}, unit: unit, wantErr: "spec.limits.cpu: -1 is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Replicas(&tt.spec, tt.scalable, tt.unit)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Replicas() error = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Replicas() error = %v", err)
			}
			if got != tt.want {
				t.Fatalf("Replicas() = %d, want %d", got, tt.want)
			}
		})
	}
}
