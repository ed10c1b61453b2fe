package nodepool

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// ResourceNodes is the key of the node count in status.resources and in spec.limits.
const ResourceNodes corev1.ResourceName = "nodes"

// baseResources are always present in status.resources, zero when the NodePool has no nodes.
var baseResources = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage, ResourceNodes,
}

// count sets status.resources to the usage of the NodePool's NodeClaims (those labelled
// karpenter.sh/nodepool=<name>, deleting ones included, since their nodes still exist) and
// status.nodes to their number. A NodeClaim that has not launched yet counts as a node with no
// resources.
func (c *Controller) count(ctx context.Context, np *karpv1.NodePool) error {
	var ncs karpv1.NodeClaimList
	if err := c.kube.List(ctx, &ncs, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		return fmt.Errorf("count nodeclaims of nodepool %s: %w", np.Name, err)
	}
	np.Status.Resources = Usage(ncs.Items, nil)
	np.Status.Nodes = ptr.To(int64(len(ncs.Items)))
	np.Status.Rollout = Rollout(ncs.Items)
	return nil
}

// Rollout counts NodeClaims by disruption state: disrupting (deleting, or DisruptionReason set),
// else drifted (Drifted=True), else up to date unless soft expiry marked them Expired.
func Rollout(ncs []karpv1.NodeClaim) *karpv1.NodePoolRollout {
	out := &karpv1.NodePoolRollout{}
	for i := range ncs {
		conds := ncs[i].Status.Conditions
		switch {
		case ncs[i].DeletionTimestamp != nil || meta.IsStatusConditionTrue(conds, karpv1.ConditionTypeDisruptionReason):
			out.Disrupting++
		case meta.IsStatusConditionTrue(conds, karpv1.ConditionTypeDrifted):
			out.Drifted++
		case meta.IsStatusConditionTrue(conds, karpv1.ConditionTypeExpired):
		default:
			out.UpToDate++
		}
	}
	return out
}

// Usage adds up what NodeClaims of one NodePool use. A launched NodeClaim counts its
// status.capacity; one that has not launched yet counts unlaunched(nc), or nothing when
// unlaunched is nil. ResourceNodes holds the number of NodeClaims, and the base resources (cpu,
// memory, pods, ephemeral-storage, nodes) are present even when zero. The NodePool status and
// the provisioner's limit arithmetic both use it.
func Usage(ncs []karpv1.NodeClaim, unlaunched func(*karpv1.NodeClaim) corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, name := range baseResources {
		out[name] = resource.Quantity{Format: formatOf(name)}
	}
	for i := range ncs {
		used := ncs[i].Status.Capacity
		if len(used) == 0 && unlaunched != nil {
			used = unlaunched(&ncs[i])
		}
		for name, q := range used {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	out[ResourceNodes] = *resource.NewQuantity(int64(len(ncs)), resource.DecimalSI)
	return out
}

// Remaining is what limits leave after usage: for each limited resource, the limit minus the
// usage, never below zero. No limits (nil or empty) gives nil, which means unlimited.
func Remaining(limits, usage corev1.ResourceList) corev1.ResourceList {
	if len(limits) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for name, limit := range limits {
		left := limit.DeepCopy()
		if u, ok := usage[name]; ok {
			left.Sub(u)
		}
		if left.Sign() < 0 {
			left = resource.Quantity{}
		}
		out[name] = left
	}
	return out
}

func formatOf(name corev1.ResourceName) resource.Format {
	if name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage {
		return resource.BinarySI
	}
	return resource.DecimalSI
}
