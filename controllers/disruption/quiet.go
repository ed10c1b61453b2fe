package disruption

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/disruption/budget"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/controllers/nodepredicates"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/controllers/state"
)

// A quiet cluster is not read again. A pass that found nothing to do remembers the change count
// (c.changes: every create, delete and relevant update of what a pass reads, counted by the
// handlers watchChanges registers) and the time until which its answer holds without a change
// (quietUntil). The next passes read nothing while the count is the same, that time has not come
// and no command is in flight; a change or the time makes the next pass read the cluster again.

// workqueueAny is the queue type handler funcs receive; the change counter never enqueues.
type workqueueAny = workqueue.TypedRateLimitingInterface[reconcile.Request]

// changesControllerName names the controller whose watches count the changes.
const changesControllerName = ControllerName + ".changes"

// watchChanges registers the handlers that count the changes of the objects a pass reads: pods and
// Nodes (only the updates podpredicates.OnChange and nodepredicates.OnChange pass, so heartbeats
// and status churn are no change), NodeClaims, NodePools, PodDisruptionBudgets, and CapacityBuffers
// when they are modelled. From then on quiet passes read nothing.
func (c *Controller) watchChanges(mgr ctrl.Manager) error {
	count := handler.Funcs{
		CreateFunc:  func(context.Context, event.CreateEvent, workqueueAny) { c.changes.Add(1) },
		UpdateFunc:  func(context.Context, event.UpdateEvent, workqueueAny) { c.changes.Add(1) },
		DeleteFunc:  func(context.Context, event.DeleteEvent, workqueueAny) { c.changes.Add(1) },
		GenericFunc: func(context.Context, event.GenericEvent, workqueueAny) { c.changes.Add(1) },
	}
	watches := []struct {
		obj   client.Object
		preds []predicate.Predicate
	}{
		{obj: &corev1.Pod{}, preds: []predicate.Predicate{podpredicates.OnChange()}},
		{obj: &corev1.Node{}, preds: []predicate.Predicate{nodepredicates.OnChange()}},
		{obj: &karpv1.NodeClaim{}},
		{obj: &karpv1.NodePool{}},
		{obj: &policyv1.PodDisruptionBudget{}},
	}
	if c.opts.CapacityBuffer {
		watches = append(watches, struct {
			obj   client.Object
			preds []predicate.Predicate
		}{obj: &autoscalingv1beta1.CapacityBuffer{}})
	}
	b := ctrl.NewControllerManagedBy(mgr).Named(changesControllerName)
	for _, w := range watches {
		b = b.WatchesRawSource(source.Kind[client.Object](mgr.GetCache(), w.obj, count, w.preds...))
	}
	err := b.Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }))
	if err != nil {
		return fmt.Errorf("watch the cluster for the disruption controller: %w", err)
	}
	c.mu.Lock()
	c.watching = true
	c.mu.Unlock()
	return nil
}

// stillQuiet reports whether the pass may skip everything: changes are counted, the last pass
// that read the cluster found nothing to do at change count gen, its answer still holds at now,
// and no command is in flight.
func (c *Controller) stillQuiet(gen uint64, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.watching && c.haveConsolidated && c.quietGen == gen && now.Before(c.consolidatedUntil) && len(c.queue) == 0
}

// nextClockChange returns the first time after now at which the answer of a pass over snapshot
// may change with no change to the cluster: ConsolidatedRefresh after now (instance-type
// availability and prices are no events), a NodePool's budget window opening or closing, a pod's
// karpenter.sh/do-not-disrupt duration running out, or the churn guard's cooldown ending for a
// node a disruption launched or a workload it moved. consolidateAfter and expiry are not here:
// their controllers set NodeClaim conditions when the time comes, which is a change.
func (c *Controller) nextClockChange(snapshot *state.ClusterState, now time.Time) time.Time {
	next := now.Add(c.opts.ConsolidatedRefresh)
	consider := func(t time.Time) {
		if t.After(now) && t.Before(next) {
			next = t
		}
	}
	for i := range snapshot.NodePools {
		if t, ok := budget.NextChange(&snapshot.NodePools[i], now); ok {
			consider(t)
		}
	}
	for i := range snapshot.Pods {
		p := &snapshot.Pods[i]
		if v, ok := p.Annotations[karpv1.DoNotDisruptAnnotationKey]; ok && p.Status.StartTime != nil {
			if d, err := time.ParseDuration(v); err == nil && d > 0 {
				consider(p.Status.StartTime.Add(d))
			}
		}
	}
	cooldown := c.planner.Options().Cooldown
	if cooldown <= 0 {
		return next
	}
	for i := range snapshot.NodeClaims {
		nc := &snapshot.NodeClaims[i]
		if nc.Annotations[planner.ReplacementForAnnotationKey] != "" {
			consider(nc.CreationTimestamp.Add(cooldown))
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, at := range c.moved {
		consider(at.Add(cooldown))
	}
	return next
}
