package nodepool

import (
	"context"
	"fmt"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/state"
)

// count sets status.resources to the usage of the NodePool's NodeClaims (those labelled
// karpenter.sh/nodepool=<name>, deleting ones included, since their nodes still exist) and
// status.nodes to their number. A NodeClaim that has not launched yet counts as a node with no
// resources.
func (c *Controller) count(ctx context.Context, np *karpv1.NodePool) error {
	var ncs karpv1.NodeClaimList
	if err := c.kube.List(ctx, &ncs, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		return fmt.Errorf("count nodeclaims of nodepool %s: %w", np.Name, err)
	}
	np.Status.Resources = state.Usage(ncs.Items, nil)
	np.Status.Nodes = ptr.To(int64(len(ncs.Items)))
	np.Status.Rollout = state.Rollout(ncs.Items)
	return nil
}
