package podpredicates

import (
	corev1 "k8s.io/api/core/v1"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
)

// IsCapacityBufferPod reports whether pod is a virtual pod that stands for a CapacityBuffer's unit
// (Karpenter's karpenter.sh/capacity-buffer-fake-pod annotation): the simulations place it, and
// nothing else may name it, since it does not exist in the cluster.
func IsCapacityBufferPod(pod *corev1.Pod) bool {
	return pod.Annotations[autoscalingv1beta1.FakePodAnnotationKey] == "true"
}
