package cloudprovider_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

func TestKubeReservedMilliCPU(t *testing.T) {
	// 6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% of the rest, rounded up.
	tests := []struct {
		vcpus int
		want  int64
	}{
		{vcpus: -1, want: 0},
		{vcpus: 0, want: 0},
		{vcpus: 1, want: 60},
		{vcpus: 2, want: 70},
		{vcpus: 3, want: 75},
		{vcpus: 4, want: 80},
		{vcpus: 5, want: 83},   // 80 + 2.5, rounded up
		{vcpus: 6, want: 85},   // 80 + 5
		{vcpus: 8, want: 90},   // 80 + 4 × 2.5
		{vcpus: 16, want: 110}, // 80 + 12 × 2.5
		{vcpus: 96, want: 310}, // 80 + 92 × 2.5
		{vcpus: 97, want: 313}, // 80 + 93 × 2.5 = 312.5, rounded up
	}
	for _, tt := range tests {
		if got := cloudprovider.KubeReservedMilliCPU(tt.vcpus); got != tt.want {
			t.Errorf("KubeReservedMilliCPU(%d) = %dm, want %dm", tt.vcpus, got, tt.want)
		}
	}
}

func TestNodeMemoryMiB(t *testing.T) {
	for _, tc := range []struct {
		name   string
		memMiB int64
		pct    float64
		arch   []string
		want   int64
	}{
		{"amd64: 7.5 % rounded up", 8192, cloudprovider.DefaultVMMemoryOverheadPercent, []string{"amd64"}, 8192 - 615},
		{"arm64 also loses 64 MiB", 8192, cloudprovider.DefaultVMMemoryOverheadPercent, []string{"arm64", "amd64"}, 8192 - 615 - 64},
		{"only the first architecture counts", 8192, 0, []string{"amd64", "arm64"}, 8192},
		{"no architecture", 1024, 0.5, nil, 512},
		{"never below zero", 32, cloudprovider.DefaultVMMemoryOverheadPercent, []string{"arm64"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := cloudprovider.NodeMemoryMiB(tc.memMiB, tc.pct, tc.arch); got != tc.want {
				t.Errorf("NodeMemoryMiB(%d, %v, %v) = %d, want %d", tc.memMiB, tc.pct, tc.arch, got, tc.want)
			}
		})
	}
}

func TestRegistrationTaints(t *testing.T) {
	nc := &karpv1.NodeClaim{}
	dedicated := karpv1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	nc.Spec.Taints = []karpv1.Taint{dedicated}
	nc.Spec.StartupTaints = []karpv1.Taint{dedicated, {Key: "cni", Effect: corev1.TaintEffectNoSchedule}}
	var got []string
	for _, taint := range cloudprovider.RegistrationTaints(nc) {
		got = append(got, taint.Key+":"+string(taint.Effect))
	}
	want := []string{"dedicated:NoSchedule", "cni:NoSchedule", karpv1.UnregisteredTaintKey + ":NoExecute"}
	if !slices.Equal(got, want) {
		t.Errorf("RegistrationTaints = %v, want %v (each once, unregistered last)", got, want)
	}
}
