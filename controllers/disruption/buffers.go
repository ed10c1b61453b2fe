package disruption

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/controllers/bufferpods"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/controllers/state"
)

// addBufferPods adds the CapacityBuffers' units (Options.CapacityBuffer) to the pending pods of
// the pass, restricted to their namespace's NodePools as the provisioner sees them. Every
// simulation then places them after the real pods: the nodes they land on without a move are
// left alone (the planner's buffered nodes: "has buffer pods"), and a command whose moves would
// take their room must also launch room for them. When the buffers cannot be read the pass runs
// without them (logged), as the provisioner does.
func (c *Controller) addBufferPods(ctx context.Context, snapshot *state.ClusterState, cl *planner.Cluster) {
	if !c.opts.CapacityBuffer {
		return
	}
	c.addVirtualPods(snapshot, cl, "CapacityBuffers", func() ([]*corev1.Pod, error) {
		set, err := bufferpods.Read(ctx, c.kube, c.log)
		if err != nil {
			return nil, err
		}
		return set.Pods, nil
	})
}
