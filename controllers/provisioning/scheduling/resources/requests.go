package resources

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// PodRequests returns what a pod needs from a node, as kube-scheduler counts it: the larger of
// its app containers plus restartable (sidecar) init containers, and the peak of its init
// containers run in order; then, for each resource the pod-level spec.resources.requests sets
// (cpu, memory and hugepages, the resources pod-level resources support), that request instead;
// plus the pod overhead and one pod slot.
func PodRequests(pod *corev1.Pod) Vec {
	var apps Vec
	for i := range pod.Spec.Containers {
		apps = apps.Plus(Of(pod.Spec.Containers[i].Resources.Requests))
	}
	var sidecars, initPeak Vec
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := Of(c.Resources.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars = sidecars.Plus(r)
			initPeak = Max(initPeak, sidecars)
			continue
		}
		initPeak = Max(initPeak, sidecars.Plus(r))
	}
	out := Max(apps.Plus(sidecars), initPeak)
	if pod.Spec.Resources != nil {
		for name, q := range pod.Spec.Resources.Requests {
			if podLevelResource(name) {
				out.Set(name, q)
			}
		}
	}
	out = out.Plus(Of(pod.Spec.Overhead))
	out.Core[Pods] = 1
	return out
}

// podLevelResource reports whether a pod-level request of the resource counts (Kubernetes 1.34
// pod-level resources): cpu, memory and hugepages-<size>. The API server refuses others.
func podLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}
