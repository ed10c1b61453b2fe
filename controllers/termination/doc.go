// Package termination takes NodeClaims and Nodes through deletion: it taints the Node
// karpenter.sh/disrupted:NoSchedule, drains it through the Eviction API (so PodDisruptionBudgets
// hold), honours the NodeClaim's terminationGracePeriod, terminates the instance through the
// CloudProvider and waits until it is gone, and only then releases the karpenter.sh/termination
// finalizers, the Node's before the NodeClaim's. Deleting a Node directly goes the same way.
//
// Drain choices (following Karpenter's documented behaviour):
//   - not evicted: DaemonSet pods, mirror (static) pods, pods that tolerate the disrupted taint,
//     and pods that already finished;
//   - pods annotated karpenter.sh/do-not-disrupt (while active: "true", or a duration counted
//     from the pod's start) are not evicted, deletion included; they hold the drain until they
//     leave on their own or the terminationGracePeriod deadline passes (without a
//     terminationGracePeriod, until they leave);
//   - non-critical pods are evicted before system-cluster-critical and system-node-critical ones;
//   - a refused eviction (429: a PodDisruptionBudget allows no disruption now) is retried on the
//     next pass, never forced, until the deadline;
//   - once now >= deadline - pod.terminationGracePeriodSeconds a remaining pod is deleted, so it
//     still gets its own grace period before the deadline;
//   - a Node that is NotReady and whose instance is already gone has nothing left to drain.
//
// It must not delete a Node before its pods were drained, and must not release a finalizer
// before the instance is gone.
package termination
