package provisioning

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/controllers/bufferpods"
	"github.com/joiner-dev/joiner/controllers/expectedpods"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/controllers/state"
)

// Pods still to come (Options.PlanForExpectedPods, Joiner's own PlanForExpectedPods gate). Every
// round that has pending pods also places, after them and after the CapacityBuffers' units, a
// virtual copy of every pod a ReplicaSet, StatefulSet or Job is still to create (package
// expectedpods): so the first round of a 1,000-replica scale-up, which sees only the pods
// kube-controller-manager created so far, plans the nodes of all 1,000, and later rounds find the
// room on the NodeClaims in flight. The copies go the buffers' way (Settle): no nomination, Event
// or metric names one, and a NodeClaim launched only for them carries no pods.

// readExpected returns the virtual pods of the pods still to come, each restricted to its
// namespace's NodePools as BuildInput restricts real pods; none when the gate is off or the
// workloads cannot be read (logged: the round then provisions for the pods there are).
func (p *Provisioner) readExpected(ctx context.Context, snapshot *state.ClusterState) []*corev1.Pod {
	if !p.planForExpectedPods {
		return nil
	}
	pods, err := expectedpods.Read(ctx, p.Client, snapshot.Pods, p.Clock.Now(), expectedpods.Options{})
	if err != nil {
		p.Log.Error(err, "provisioning without the pods still to come this round")
		return nil
	}
	return snapshot.Tenancy().RestrictAll(pods)
}

// settleExpected strips the expected pods from results (bufferpods.Settle) and logs where each
// workload's went; n is how many the round placed.
func (p *Provisioner) settleExpected(results *scheduling.Results, n int) *scheduling.Results {
	if n == 0 || results == nil {
		return results
	}
	out, outcomes := bufferpods.Settle(results)
	for key, o := range outcomes {
		p.Log.V(1).Info("planned for pods still to be created", "workload", key, "onExistingRoom", o.Existing, "onNewNodeClaims", o.New, "unplaced", o.Failed, "reason", o.Err)
	}
	return out
}
