package termination

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/controllers/podpredicates"
)

// podClass says what a drain does with a pod: one of the drain groups, evicted in their order,
// or one of the reasons it is left alone.
type podClass int

// The drain groups, in eviction order (Karpenter's, which is the order of a graceful node
// shutdown): a group is evicted only once every pod of the groups before it is gone. Then the
// classes of the pods a drain leaves alone.
const (
	// groupNonCritical: ordinary pods.
	groupNonCritical podClass = iota
	// groupNonCriticalDaemon: DaemonSet pods, so that log shippers and node-local agents serve
	// the ordinary pods until those are gone.
	groupNonCriticalDaemon
	// groupCritical: system-cluster-critical and system-node-critical pods.
	groupCritical
	// groupCriticalDaemon: critical DaemonSet pods (node-local DNS, CNI agents) go last.
	groupCriticalDaemon
	// drainGroups is the number of drain groups.
	drainGroups
	// classFinished: a pod that succeeded or failed holds nothing.
	classFinished = drainGroups + 1
	// classStays: a mirror (static) pod, a pod tolerating the disrupted taint (it could land right
	// back) or a pod stuck terminating (its kubelet is presumed gone). Such a pod does not move, so
	// termination does not wait on its volumes either.
	classStays = drainGroups + 2
)

// classify returns the drain group of the pod at now, or why the drain leaves it alone.
func classify(pod *corev1.Pod, now time.Time) podClass {
	switch {
	case podpredicates.IsTerminal(pod):
		return classFinished
	case podpredicates.IsMirrorPod(pod), podpredicates.ToleratesDisruptedTaint(pod):
		return classStays
	case !pod.DeletionTimestamp.IsZero() && now.Sub(pod.DeletionTimestamp.Time) > stuckTerminatingAfter:
		return classStays
	}
	group := groupNonCritical
	if podpredicates.IsCritical(pod) {
		group = groupCritical
	}
	if podpredicates.IsDaemonSetPod(pod) {
		group++
	}
	return group
}

// drained reports whether the class is a drain group: its pods must be gone before the Node
// counts as drained.
func (c podClass) drained() bool { return c >= groupNonCritical && c < drainGroups }

// holdsDrain reports whether the pod must be gone before the Node counts as drained.
func holdsDrain(pod *corev1.Pod, now time.Time) bool { return classify(pod, now).drained() }

// groupForDrain sorts the pods that hold the drain into the drain groups, in eviction order;
// the pods a drain leaves alone are in none.
func groupForDrain(pods []corev1.Pod, now time.Time) [drainGroups][]*corev1.Pod {
	var groups [drainGroups][]*corev1.Pod
	for i := range pods {
		if c := classify(&pods[i], now); c.drained() {
			groups[c] = append(groups[c], &pods[i])
		}
	}
	return groups
}
