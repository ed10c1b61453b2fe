package staticpool

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
)

// podNodeNameField is the cache index of pods by spec.nodeName that scale-down counts pods with.
const podNodeNameField = "spec.nodeName"

// scaleDownCandidate is a NodeClaim scale-down may delete, with what orders it.
type scaleDownCandidate struct {
	nodeClaim   *karpv1.NodeClaim
	initialized bool
	// pods is the number of pods on its Node that would have to move: not DaemonSet or mirror
	// pods, not terminal.
	pods int
}

// scaleDownOrder sorts candidates into the order scale-down deletes them: NodeClaims that are
// not initialized yet (nothing runs there), then those whose Node has the fewest pods to move,
// then the newest; the name breaks ties so the order is stable.
func scaleDownOrder(cands []scaleDownCandidate) {
	slices.SortFunc(cands, func(a, b scaleDownCandidate) int {
		if a.initialized != b.initialized {
			if !a.initialized {
				return -1
			}
			return 1
		}
		if c := cmp.Compare(a.pods, b.pods); c != 0 {
			return c
		}
		if c := b.nodeClaim.CreationTimestamp.Compare(a.nodeClaim.CreationTimestamp.Time); c != 0 {
			return c
		}
		return cmp.Compare(a.nodeClaim.Name, b.nodeClaim.Name)
	})
}

// scaleDownCandidates returns the NodeClaims in scale-down order, with the pods of each one's
// Node counted from the cache.
func (c *Controller) scaleDownCandidates(ctx context.Context, ncs []*karpv1.NodeClaim) ([]scaleDownCandidate, error) {
	cands := make([]scaleDownCandidate, 0, len(ncs))
	for _, nc := range ncs {
		cand := scaleDownCandidate{nodeClaim: nc, initialized: meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized)}
		if nc.Status.NodeName != "" {
			n, err := c.podsToMove(ctx, nc.Status.NodeName)
			if err != nil {
				return nil, err
			}
			cand.pods = n
		}
		cands = append(cands, cand)
	}
	scaleDownOrder(cands)
	return cands, nil
}

// podsToMove counts the pods on the Node that deleting it would move elsewhere.
func (c *Controller) podsToMove(ctx context.Context, nodeName string) (int, error) {
	var pods corev1.PodList
	if err := c.kube.List(ctx, &pods, client.MatchingFields{podNodeNameField: nodeName}); err != nil {
		return 0, fmt.Errorf("list pods of node %s: %w", nodeName, err)
	}
	n := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		if !podpredicates.IsDaemonSetPod(p) && !podpredicates.IsMirrorPod(p) && !podpredicates.IsTerminal(p) {
			n++
		}
	}
	return n, nil
}
