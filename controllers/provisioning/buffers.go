package provisioning

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
	"github.com/joiner-dev/joiner/controllers/bufferpods"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/controllers/state"
)

// Headroom (Options.CapacityBuffer, Karpenter's CapacityBuffer gate). Every round reads the
// CapacityBuffers the capacitybuffer controller resolved and adds their units as virtual pods
// (package bufferpods) after the real pending pods: the simulation places the real pods first (so
// they take the free room of existing nodes and NodeClaims in flight), then the units, on the room
// left or on new NodeClaims within the NodePools' limits. Free room that a unit takes counts as
// used; when a real pod lands on it (kube-scheduler does not see the units), the next round
// places the unit elsewhere and launches capacity for it: the buffer refills. The units are
// stripped from the results before anything acts on them, so no nomination, Event or metric
// names one; a NodeClaim launched only for units carries no pods.

// readBuffers returns the buffers' virtual pods for this round, each restricted to its namespace's
// NodePools as BuildInput restricts real pods; an empty set when the gate is off or the buffers
// cannot be read (logged: the round then provisions for real pods only).
func (p *Provisioner) readBuffers(ctx context.Context, snapshot *state.ClusterState) *bufferpods.Set {
	if !p.capacityBuffer {
		return &bufferpods.Set{}
	}
	set, err := bufferpods.Read(ctx, p.Client, p.Log)
	if err != nil {
		p.Log.Error(err, "provisioning without CapacityBuffers this round")
		return &bufferpods.Set{}
	}
	set.Pods = snapshot.Tenancy().RestrictAll(set.Pods)
	return set
}

// settleBuffers strips the virtual pods from results and reports, on each buffer's Provisioning
// condition, whether its units fit the capacity there is or need new capacity.
func (p *Provisioner) settleBuffers(ctx context.Context, set *bufferpods.Set, results *scheduling.Results) *scheduling.Results {
	if len(set.Buffers) == 0 || results == nil {
		return results
	}
	out, outcomes := bufferpods.Settle(results)
	for key, o := range outcomes {
		if o.New > 0 || o.Failed > 0 {
			p.Log.V(1).Info("CapacityBuffer units need new capacity", "capacitybuffer", key, "existing", o.Existing, "new", o.New, "unplaced", o.Failed, "reason", o.Err)
		}
	}
	if err := set.Report(ctx, p.Client, p.Clock.Now(), outcomes); err != nil {
		p.Log.Error(err, "report CapacityBuffer provisioning")
	}
	return out
}

// setupBufferTriggers makes CapacityBuffer changes, and pods binding to nodes (they may take a
// buffer's room, which then refills), trigger a round; only with Options.CapacityBuffer.
func (p *Provisioner) setupBufferTriggers(mgr ctrl.Manager) error {
	if !p.capacityBuffer {
		return nil
	}
	trigger := func() { p.batcher.Trigger() }
	buffers := handler.Funcs{
		CreateFunc: func(context.Context, event.CreateEvent, workqueueAny) { trigger() },
		UpdateFunc: func(context.Context, event.UpdateEvent, workqueueAny) { trigger() },
	}
	bound := handler.Funcs{UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueueAny) {
		oldPod, ok1 := e.ObjectOld.(*corev1.Pod)
		newPod, ok2 := e.ObjectNew.(*corev1.Pod)
		if ok1 && ok2 && oldPod.Spec.NodeName == "" && newPod.Spec.NodeName != "" {
			trigger()
		}
	}}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("provisioner-buffer-trigger").
		WatchesRawSource(sourceFor(mgr, &autoscalingv1beta1.CapacityBuffer{}, buffers)).
		WatchesRawSource(sourceFor(mgr, &corev1.Pod{}, bound)).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }))
	if err != nil {
		return fmt.Errorf("watch CapacityBuffers for the provisioner: %w", err)
	}
	return nil
}
