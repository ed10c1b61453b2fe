// Package noderepair is node repair (Karpenter's node health controller, gate NodeRepair): it
// replaces the machines behind Nodes that stay broken. It deletes NodeClaims; draining and
// terminating a deleted NodeClaim is package termination's job, and provisioning replaces the
// capacity. It is registered only when the NodeRepair gate is on and the cloud provider declares
// repair policies (cloudprovider.CloudProvider.RepairPolicies).
//
// A policy names a Node condition type, the status that marks it unhealthy and how long that may
// last (Karpenter's default: Ready False or Unknown, 30 minutes; the AWS provider adds the
// conditions of the EKS node monitoring agent). For each Node owned by a NodeClaim that is not
// being deleted:
//
//   - Of the policies one of the Node's conditions matches, the one whose toleration ends first
//     (lastTransitionTime + toleration) decides; the controller looks again at that instant of
//     its injected clock.
//   - When it has come, the controller counts the unhealthy Nodes (matching any policy, even
//     within its toleration) of the NodeClaim's NodePool (Nodes labelled karpenter.sh/nodepool),
//     or of the whole cluster for a NodeClaim without a NodePool. Repair goes on only while
//     unhealthy ≤ ceil(20% × nodes), so 1 of 3 passes and 3 of 5 does not: a problem that hits
//     many nodes at once (a bad image, a network outage) must not delete the fleet. Otherwise the
//     Node gets the Warning event NodeRepairBlocked "more than 20% nodes are unhealthy in the
//     nodepool" (or "cluster"), at most every 15 minutes, and the controller looks again after 5
//     minutes.
//   - To repair, it sets the NodeClaim's condition DisruptionReason=True (reason Unhealthy, the
//     message naming the condition, since when and the toleration), stamps
//     karpenter.sh/nodeclaim-termination-timestamp with now (Karpenter's mark that the NodeClaim's
//     terminationGracePeriod is over, so that termination waits on none of its pods), and deletes
//     the NodeClaim. Disruption budgets and
//     karpenter.sh/do-not-disrupt are not consulted. It records Warning events Unhealthy on the Node
//     and the NodeClaim, a log line, and counts karpenter_nodeclaims_disrupted_total{reason=
//     "unhealthy"} and karpenter_nodeclaims_unhealthy_disrupted_total{condition, nodepool,
//     capacity_type, image_id}.
//
// Every write is guarded by the resourceVersion the controller read, so a reconcile on a stale
// cache retries instead of repairing (or counting) twice. Options.Toleration replaces every
// toleration, for tests; it is not a user setting.
package noderepair
