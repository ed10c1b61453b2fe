package cloudprovider_test

import (
	"testing"

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
