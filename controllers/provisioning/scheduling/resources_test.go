package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestResourceFit(t *testing.T) {
	tests := []struct {
		name     string
		pods     []*corev1.Pod
		wantType []string // cheapest option of each NodeClaim, in order
		wantErr  string
	}{
		{"smallest type that fits, overhead included", []*corev1.Pod{newPod("p", "900m", "1Gi")}, []string{"fake-it-0"}, ""},
		{"100m more needs the next size", []*corev1.Pod{newPod("p", "901m", "1Gi")}, []string{"fake-it-1"}, ""},
		{"memory decides", []*corev1.Pod{newPod("p", "100m", "2Gi")}, []string{"fake-it-1"}, ""},
		{"pods share a node", []*corev1.Pod{newPod("a", "1", "1Gi"), newPod("b", "1", "1Gi")}, []string{"fake-it-2"}, ""},
		{"too big for every type", []*corev1.Pod{newPod("p", "17", "1Gi")}, nil,
			`NodePool "default" ruled out: no instance type has cpu 17, memory 1Gi, pods 1 allocatable`},
		{"extended resource only on the gpu type", []*corev1.Pod{newPod("p", "1", "1Gi", withRequests("nvidia.com/gpu", "1"))}, []string{"gpu-8"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			its := append(fakeTypes(16), gpuType())
			r := solve(t, Input{Pods: tt.pods, NodePools: []NodePool{pool(newNodePool("default"), its...)}})
			if tt.wantErr != "" {
				if len(r.PodErrors) != 1 {
					t.Fatalf("want one error, got %v", outcome(r))
				}
				wantContains(t, r.PodErrors[0].Err.Error(), tt.wantErr)
				return
			}
			var got []string
			for _, nc := range r.NewNodeClaims {
				got = append(got, cheapest(nc))
			}
			if len(r.PodErrors) > 0 || len(got) != len(tt.wantType) {
				t.Fatalf("got %v, %v", got, outcome(r))
			}
			for i := range got {
				if got[i] != tt.wantType[i] {
					t.Errorf("NodeClaim %d cheapest option %s, want %s", i, got[i], tt.wantType[i])
				}
			}
		})
	}
}
