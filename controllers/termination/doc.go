// Package termination takes NodeClaims and Nodes through deletion: it taints the Node
// karpenter.sh/disrupted:NoSchedule, drains it through the Eviction API (so PodDisruptionBudgets
// hold), waits until the VolumeAttachments of the drained pods' volumes are gone, honours the
// NodeClaim's terminationGracePeriod, terminates the instance through the CloudProvider and waits
// until it is gone, and only then releases the karpenter.sh/termination finalizers, the Node's
// before the NodeClaim's. Deleting a Node directly goes the same way.
//
// Drain choices (following Karpenter's documented behaviour):
//   - not evicted: mirror (static) pods, pods that tolerate the disrupted taint, pods that already
//     finished, and pods stuck terminating (a minute past their deletion);
//   - the others leave in four groups, each only once every pod of the groups before it is gone:
//     ordinary pods, DaemonSet pods, system-cluster-critical and system-node-critical pods, then
//     critical DaemonSet pods (the order of a graceful node shutdown);
//   - pods annotated karpenter.sh/do-not-disrupt (while active: "true", or a duration counted
//     from the pod's start) are not evicted, deletion included; they hold the drain (and the
//     groups after theirs) until they leave on their own or the terminationGracePeriod deadline
//     passes (without a terminationGracePeriod, until they leave);
//   - a refused eviction (429: a PodDisruptionBudget allows no disruption now) is retried on the
//     next pass, never forced, until the deadline;
//   - once now >= deadline - pod.terminationGracePeriodSeconds a remaining pod is deleted, whatever
//     its group, so it still gets its own grace period before the deadline;
//   - a Node that is NotReady and whose instance is already gone has nothing left to drain, and
//     no volumes to wait for.
//
// Volumes: after the drain, termination waits (VolumesDetached Unknown/AwaitingVolumeDetachment,
// an event on the Node, a check every second) for the Node's VolumeAttachments of
// PersistentVolumes, except those of pods the drain leaves in place, which would never detach.
// Terminating the instance first would leave those volumes to the attach-detach controller's
// 6-minute force-detach before their pods could start elsewhere. Past the terminationGracePeriod
// deadline the wait is skipped (VolumesDetached False/TerminationGracePeriodElapsed).
//
// It must not delete a Node before its pods were drained, and must not release a finalizer
// before the instance is gone.
package termination
