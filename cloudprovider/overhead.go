package cloudprovider

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
