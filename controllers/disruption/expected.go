package disruption

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/controllers/expectedpods"
	"github.com/joiner-dev/joiner/controllers/state"
)

// addExpectedPods adds the pods workloads are still to create (Options.PlanForExpectedPods) to the
// pending pods of the pass, after the buffers' units: the just-launched empty nodes the
// provisioner planned for them are then buffered (left alone) until the pods arrive or their
// workload no longer wants them.
func (c *Controller) addExpectedPods(ctx context.Context, snapshot *state.ClusterState, cl *planner.Cluster) {
	if !c.opts.PlanForExpectedPods {
		return
	}
	c.addVirtualPods(snapshot, cl, "the pods still to come", func() ([]*corev1.Pod, error) {
		return expectedpods.Read(ctx, c.kube, snapshot.Pods, c.clock.Now(), expectedpods.Options{})
	})
}

// addVirtualPods adds the virtual pods read returns to the pending pods of the pass, restricted to
// their namespace's NodePools as the provisioner sees them. When they cannot be read the pass runs
// without them (logged, naming what), as the provisioner does.
func (c *Controller) addVirtualPods(snapshot *state.ClusterState, cl *planner.Cluster, what string, read func() ([]*corev1.Pod, error)) {
	pods, err := read()
	if err != nil {
		c.log.Error(err, "disruption pass without "+what)
		return
	}
	cl.Input.Pods = append(cl.Input.Pods, snapshot.Tenancy().RestrictAll(pods)...)
}
