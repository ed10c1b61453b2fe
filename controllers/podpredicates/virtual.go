package podpredicates

import corev1 "k8s.io/api/core/v1"

// ExpectedPodAnnotationKey names, on a virtual pod that stands for a pod its workload is still
// to create (package expectedpods, the PlanForExpectedPods gate), that workload as
// "Kind namespace/name". Joiner's own: Karpenter plans for no such pods.
const ExpectedPodAnnotationKey = "joiner.dev/expected-pod-of"

// IsExpectedPod reports whether pod is a virtual pod that stands for a pod a ReplicaSet,
// StatefulSet or Job has yet to create: the simulations place it, and nothing else may name it.
func IsExpectedPod(pod *corev1.Pod) bool {
	return pod.Annotations[ExpectedPodAnnotationKey] != ""
}

// IsVirtualPod reports whether pod exists only in the simulations: a CapacityBuffer's unit or an
// expected pod. The simulations place virtual pods after every real pod; their placements are
// stripped before anything acts on them.
func IsVirtualPod(pod *corev1.Pod) bool {
	return IsCapacityBufferPod(pod) || IsExpectedPod(pod)
}
