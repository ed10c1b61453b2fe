package cloudprovider

import (
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// KubeReservedMilliCPU returns the cpu, in millicores, that the kubelet and the container runtime
// keep for themselves on a node with vcpus cores, by the formula of the EKS-optimized AMIs (which
// Karpenter's AWS provider also applies): 6% of the first core, 1% of the second, 0.5% of the third
// and the fourth, and 0.25% of every further core, rounded up to a whole millicore. Zero or fewer
// cores reserve nothing.
//
// Providers whose nodes follow that formula (aws, and local, which models AWS nodes) put it in
// Overhead.KubeReserved; a kubelet configuration that sets kubeReserved cpu replaces it.
func KubeReservedMilliCPU(vcpus int) int64 {
	// Per-core shares in tenths of a millicore, so that 0.25% (2.5m) stays exact.
	var tenths int64
	for core := 1; core <= vcpus; core++ {
		switch {
		case core == 1:
			tenths += 600
		case core == 2:
			tenths += 100
		case core <= 4:
			tenths += 50
		default:
			tenths += 25
		}
	}
	return (tenths + 9) / 10
}

// DefaultVMMemoryOverheadPercent is the share of a virtual machine's memory the hypervisor keeps
// (Karpenter's vmMemoryOverheadPercent default).
const DefaultVMMemoryOverheadPercent = 0.075

// arm64ReservedMiB is memory arm64 kernels reserve for the contiguous memory allocator.
const arm64ReservedMiB = 64

// NodeMemoryMiB is the memory, in MiB, a node of an instance type with memoryMiB and the given
// architectures (the first one counts) reports: less the VM overhead (overheadPercent of it,
// rounded up) and, on arm64, what the kernel reserves; never below zero.
func NodeMemoryMiB(memoryMiB int64, overheadPercent float64, architectures []string) int64 {
	out := memoryMiB - int64(math.Ceil(float64(memoryMiB)*overheadPercent))
	if len(architectures) > 0 && architectures[0] == karpv1.ArchitectureArm64 {
		out -= arm64ReservedMiB
	}
	return max(out, 0)
}

// RegistrationTaints are the taints a kubelet registers a NodeClaim's Node with: its taints and
// startup taints, and karpenter.sh/unregistered, which registration removes; each once.
func RegistrationTaints(nodeClaim *karpv1.NodeClaim) []corev1.Taint {
	var out []corev1.Taint
	add := func(t corev1.Taint) {
		if !slices.ContainsFunc(out, func(h corev1.Taint) bool { return h.MatchTaint(&t) }) {
			out = append(out, t)
		}
	}
	for _, t := range nodeClaim.Spec.Taints {
		add(t.ToCore())
	}
	for _, t := range nodeClaim.Spec.StartupTaints {
		add(t.ToCore())
	}
	add(karpv1.UnregisteredNoExecuteTaint())
	return out
}
