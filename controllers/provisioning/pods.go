package provisioning

import (
	corev1 "k8s.io/api/core/v1"
)

// IsProvisionable reports whether a pod is one the provisioner should find capacity for: pending,
// not bound, not nominated to a node by kube-scheduler, not owned by a DaemonSet, and marked
// Unschedulable by kube-scheduler.
func IsProvisionable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.Status.NominatedNodeName != "" || pod.DeletionTimestamp != nil {
		return false
	}
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if IsDaemonSetPod(pod) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}

// IsDaemonSetPod reports whether a DaemonSet controls the pod.
func IsDaemonSetPod(pod *corev1.Pod) bool {
	for _, o := range pod.OwnerReferences {
		if o.Controller != nil && *o.Controller && o.Kind == "DaemonSet" {
			return true
		}
	}
	return false
}

// isTerminal reports whether a pod no longer uses its node's resources.
func isTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}
