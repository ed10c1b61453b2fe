package state

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// ResourceNodes is the key of the node count in status.resources and in spec.limits.
const ResourceNodes corev1.ResourceName = "nodes"

// baseResources are always present in status.resources, zero when the NodePool has no nodes.
var baseResources = []corev1.ResourceName{
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage, ResourceNodes,
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

// NodePoolRemaining is what is left of a NodePool's limits after its NodeClaims, launched or in flight.
// A launched NodeClaim counts its capacity; one not launched yet counts the largest capacity among
// its instance-type options, so that limits hold whatever the launch picks.
func NodePoolRemaining(np *karpv1.NodePool, claims []karpv1.NodeClaim, its []*cloudprovider.InstanceType) corev1.ResourceList {
	if len(np.Spec.Limits) == 0 {
		return nil
	}
	byName := map[string]*cloudprovider.InstanceType{}
	for _, it := range its {
		byName[it.Name] = it
	}
	var own []karpv1.NodeClaim
	for i := range claims {
		if claims[i].Labels[karpv1.NodePoolLabelKey] == np.Name {
			own = append(own, claims[i])
		}
	}
	usage := Usage(own, func(nc *karpv1.NodeClaim) corev1.ResourceList { return largestOption(nc, byName) })
	return Remaining(np.Spec.Limits, usage)
}

// largestOption returns, per resource, the largest capacity among the NodeClaim's instance-type
// options (its node.kubernetes.io/instance-type In requirement).
func largestOption(nc *karpv1.NodeClaim, byName map[string]*cloudprovider.InstanceType) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, r := range nc.Spec.Requirements {
		if r.Key != corev1.LabelInstanceTypeStable || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		for _, name := range r.Values {
			it := byName[name]
			if it == nil {
				continue
			}
			for res, q := range it.Capacity {
				if cur, ok := out[res]; !ok || q.Cmp(cur) > 0 {
					out[res] = q.DeepCopy()
				}
			}
		}
	}
	if len(out) == 0 {
		return nc.Spec.Resources.Requests
	}
	return out
}
