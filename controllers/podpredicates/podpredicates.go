// Package podpredicates answers the questions about a pod that provisioning, termination (the
// drain) and disruption all ask: is it owned by a DaemonSet, a mirror pod, terminal, critical,
// protected by karpenter.sh/do-not-disrupt, tolerant of the disrupted taint, worth provisioning
// capacity for, how long is its grace period, and did an update change anything they read
// (changed.go). Keeping them here means every controller answers them the same way.
//
// It only reads pods: its functions are pure, never change the pod they are given, never talk to
// the API server and never read the clock (callers pass the time in).
package podpredicates

import (
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Priority classes Kubernetes ships for pods the cluster or a node cannot do without.
const (
	// SystemClusterCritical is the priority class of pods critical to the cluster.
	SystemClusterCritical = "system-cluster-critical"
	// SystemNodeCritical is the priority class of pods critical to their node.
	SystemNodeCritical = "system-node-critical"
)

// IsDaemonSetPod reports whether a DaemonSet controls the pod.
func IsDaemonSetPod(pod *corev1.Pod) bool {
	owner := metav1.GetControllerOf(pod)
	return owner != nil && owner.Kind == "DaemonSet"
}

// IsMirrorPod reports whether the pod is the API server's mirror of a static pod, which the
// kubelet manages from a file and which cannot be evicted.
func IsMirrorPod(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[corev1.MirrorPodAnnotationKey]
	return ok
}

// IsTerminal reports whether the pod has finished (Succeeded or Failed) and so no longer uses
// its node's resources.
func IsTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// IsCritical reports whether the pod runs at the system-cluster-critical or system-node-critical
// priority class. A drain evicts such pods last.
func IsCritical(pod *corev1.Pod) bool {
	return pod.Spec.PriorityClassName == SystemClusterCritical || pod.Spec.PriorityClassName == SystemNodeCritical
}

// DoNotDisruptActive reports whether the pod's karpenter.sh/do-not-disrupt annotation protects it
// at now: "true" always does; a positive duration ("1h") does until that long after the pod
// started, and for as long as it has not started. Other values protect nothing.
func DoNotDisruptActive(pod *corev1.Pod, now time.Time) bool {
	v, ok := pod.Annotations[karpv1.DoNotDisruptAnnotationKey]
	if !ok {
		return false
	}
	if v == "true" {
		return true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return false
	}
	if pod.Status.StartTime == nil {
		return true
	}
	return now.Before(pod.Status.StartTime.Add(d))
}

// ToleratesDisruptedTaint reports whether the pod tolerates karpenter.sh/disrupted:NoSchedule.
// Such a pod could be scheduled right back onto a node being drained, so evicting it would not
// help.
func ToleratesDisruptedTaint(pod *corev1.Pod) bool {
	taint := karpv1.DisruptedNoScheduleTaint()
	return slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool {
		return t.ToleratesTaint(logr.Discard(), &taint, false)
	})
}

// GracePeriod is the pod's terminationGracePeriodSeconds, or the Kubernetes default (30s) when
// it is unset.
func GracePeriod(pod *corev1.Pod) time.Duration {
	if pod.Spec.TerminationGracePeriodSeconds == nil {
		return corev1.DefaultTerminationGracePeriodSeconds * time.Second
	}
	return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
}

// IsProvisionable reports whether the pod is one the provisioner should find capacity for:
// pending, not bound, not being deleted, not nominated to a node by kube-scheduler, not terminal,
// not owned by a DaemonSet, and marked Unschedulable by kube-scheduler.
func IsProvisionable(pod *corev1.Pod) bool {
	if pod.Spec.NodeName != "" || pod.Status.NominatedNodeName != "" || pod.DeletionTimestamp != nil {
		return false
	}
	if IsTerminal(pod) || IsDaemonSetPod(pod) {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}
