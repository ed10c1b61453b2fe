package nodepool

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// ResourceNodes is the key of the node count in status.resources (and in spec.limits).
const ResourceNodes corev1.ResourceName = "nodes"

// count sets status.resources to the summed capacity of the NodePool's NodeClaims (those labelled
// karpenter.sh/nodepool=<name>, deleting ones included, since their nodes still exist) plus their
// number under "nodes", and status.nodes to that number.
func (c *Controller) count(ctx context.Context, np *karpv1.NodePool) error {
	var ncs karpv1.NodeClaimList
	if err := c.kube.List(ctx, &ncs, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		return fmt.Errorf("count nodeclaims of nodepool %s: %w", np.Name, err)
	}
	np.Status.Resources = sumCapacity(ncs.Items)
	np.Status.Nodes = ptr.To(int64(len(ncs.Items)))
	return nil
}

// sumCapacity adds up the capacity of the NodeClaims, with the base resources present even when
// zero and the number of NodeClaims under "nodes".
func sumCapacity(ncs []karpv1.NodeClaim) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, name := range baseResources {
		out[name] = resource.Quantity{Format: formatOf(name)}
	}
	for i := range ncs {
		for name, q := range ncs[i].Status.Capacity {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	out[ResourceNodes] = *resource.NewQuantity(int64(len(ncs)), resource.DecimalSI)
	return out
}

func formatOf(name corev1.ResourceName) resource.Format {
	if name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage {
		return resource.BinarySI
	}
	return resource.DecimalSI
}
