package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

// bufferPod marks a pod as a CapacityBuffer's virtual pod.
func bufferPod(p *corev1.Pod) {
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[autoscalingv1beta1.FakePodAnnotationKey] = "true"
}

// TestBufferPodsAfterRealPods: CapacityBuffers' virtual pods take only the room real pods leave,
// whatever their size or input order.
func TestBufferPodsAfterRealPods(t *testing.T) {
	room := func() *ExistingNode {
		n := existingNode("n1", fake.Zone1)
		n.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")}
		return n
	}
	tests := []struct {
		name string
		pods []*corev1.Pod
		want map[string]string
	}{
		{"a larger buffer pod listed first leaves the room to the real pod",
			[]*corev1.Pod{newPod("unit", "1500m", "1Gi", bufferPod), newPod("real", "1200m", "1Gi")},
			map[string]string{"real": "existing:n1", "unit": "node0"}},
		{"buffer pods fill what room is left",
			[]*corev1.Pod{newPod("unit", "500m", "500Mi", bufferPod), newPod("real", "1", "1Gi")},
			map[string]string{"real": "existing:n1", "unit": "existing:n1"}},
		{"without real pods the buffer takes the free room",
			[]*corev1.Pod{newPod("unit", "1500m", "1Gi", bufferPod)},
			map[string]string{"unit": "existing:n1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: tt.pods, ExistingNodes: []*ExistingNode{room()}, NodePools: []NodePool{pool(newNodePool("default"))}})
			got := outcome(r)
			for pod, want := range tt.want {
				if got[pod] != want {
					t.Errorf("%s on %q, want %q", pod, got[pod], want)
				}
			}
		})
	}
}
