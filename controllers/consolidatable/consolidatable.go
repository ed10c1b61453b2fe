// Package consolidatable maintains the Consolidatable status condition of NodeClaims, as
// Karpenter v1.14 does: a NodeClaim becomes Consolidatable=True once its NodePool's
// consolidateAfter has passed since its last pod event (status.lastPodEventTime, kept by package
// podevents), or since it was initialized when no pod event was recorded. Until then, and
// whenever consolidation does not apply to it, the condition is absent (never False).
//
// It only writes that condition, through a status patch, and only when it changes. Consolidation
// itself reads the condition; this package never disrupts a node.
package consolidatable

import (
	"context"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
)

// ControllerName is the name of the Consolidatable condition controller (logs, metrics).
const ControllerName = "nodeclaim.consolidatable"

// ReasonConsolidatable is the reason of the Consolidatable=True condition.
const ReasonConsolidatable = "Consolidatable"

// Options tune the Consolidatable condition controller. The zero value means the defaults.
type Options struct {
	// MaxConcurrentReconciles bounds parallel reconciles. Zero means
	// defaults.MaxConcurrentReconciles.
	MaxConcurrentReconciles int
}

// Controller sets and removes the Consolidatable condition of NodeClaims.
type Controller struct {
	kube   client.Client
	clock  clock.Clock
	opts   Options
	status *statusreconcile.Reconciler[*karpv1.NodeClaim]
}

// NewController returns a Consolidatable condition controller. kube should be a manager's cached
// client. A nil clock means the real clock.
func NewController(kube client.Client, clk clock.Clock, opts Options) *Controller {
	clk = defaults.Clock(clk)
	opts.MaxConcurrentReconciles = defaults.Positive(opts.MaxConcurrentReconciles, defaults.MaxConcurrentReconciles)
	c := &Controller{kube: kube, clock: clk, opts: opts}
	c.status = statusreconcile.NodeClaimsByPool(kube, c.decide)
	return c
}

// Reconcile brings one NodeClaim's Consolidatable condition up to date and, while the NodeClaim
// waits for consolidateAfter to pass, requeues it for the moment it does. NodeClaims being
// deleted are left as they are.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return c.status.Reconcile(ctx, req)
}

// decide computes the condition of a NodeClaim that is not being deleted.
func (c *Controller) decide(_ context.Context, nc *karpv1.NodeClaim, np *karpv1.NodePool) (statusreconcile.Outcome, error) {
	result, why := c.evaluate(np, nc)
	return statusreconcile.Outcome{Result: result, Stored: func(ctx context.Context) {
		if why == "" {
			log.FromContext(ctx).V(1).Info("nodeclaim is consolidatable", "nodeclaim", nc.Name)
		} else {
			log.FromContext(ctx).V(1).Info("removed the consolidatable condition", "nodeclaim", nc.Name, "reason", why)
		}
	}}, nil
}

// evaluate sets or removes the NodeClaim's Consolidatable condition in memory, given its NodePool
// (nil: none). It returns when to look again, and why the condition is absent (empty when it is
// set).
func (c *Controller) evaluate(np *karpv1.NodePool, nc *karpv1.NodeClaim) (reconcile.Result, string) {
	remove := func(why string) string {
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeConsolidatable)
		return why
	}
	switch {
	case np == nil:
		return reconcile.Result{}, remove("the nodeclaim has no nodepool")
	case np.IsStatic():
		return reconcile.Result{}, remove("the nodepool is static")
	case np.Spec.Disruption.ConsolidateAfter.IsNever():
		return reconcile.Result{}, remove("consolidation is disabled (consolidateAfter: Never)")
	}
	initialized := nc.StatusCondition(karpv1.ConditionTypeInitialized)
	if initialized == nil || initialized.Status != metav1.ConditionTrue {
		return reconcile.Result{}, remove("the nodeclaim is not initialized")
	}
	// Pods can schedule from the moment the node is initialized; without a pod event since, that
	// is when the wait starts.
	since := initialized.LastTransitionTime.Time
	if !nc.Status.LastPodEventTime.IsZero() {
		since = nc.Status.LastPodEventTime.Time
	}
	now := c.clock.Now()
	if wait := since.Add(*np.Spec.Disruption.ConsolidateAfter.Duration).Sub(now); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, remove("consolidateAfter has not passed since the last pod event")
	}
	nc.SetCondition(now, karpv1.ConditionTypeConsolidatable, metav1.ConditionTrue, ReasonConsolidatable, "")
	return reconcile.Result{}, ""
}

// SetupWithManager registers the controller with mgr. It watches NodeClaims, and NodePools whose
// spec changes (or that come or go), which enqueue their NodeClaims.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	w := statusreconcile.PoolWatch{Name: ControllerName, MaxConcurrentReconciles: c.opts.MaxConcurrentReconciles,
		PoolChanged: predicate.GenerationChangedPredicate{}}
	return w.SetupWithManager(mgr, c.kube, c)
}
