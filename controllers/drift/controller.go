// Package drift maintains the Drifted status condition of NodeClaims, as Karpenter v1.14 does
// (nodeclaim/disruption/drift.go). A NodeClaim that is not Launched has no Drifted condition. A
// launched one is Drifted=True, with the reason as both reason and message, on the first of:
//
//  1. NodePoolDrifted: its NodePool's template hash (package nodepoolhash) differs from the one
//     it was built with, both stamped under the same hash version;
//  2. RequirementsDrifted: its labels no longer satisfy the NodePool's requirements;
//  3. the cloud provider's IsDrifted reason (for example a node class change).
//
// Otherwise the condition is removed (never False). Karpenter's InstanceTypeNotFound check is not
// made. The package only writes that condition; the disruption controller replaces drifted nodes.
package drift

import (
	"context"
	"fmt"
	"time"

	"github.com/joiner-dev/joiner/controllers/nodeclasswatch"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
)

// ControllerName is the name of the Drifted condition controller (logs, metrics).
const ControllerName = "nodeclaim.drift"

// DefaultRequeueInterval is how often a launched NodeClaim is checked again without a watched
// change (Karpenter: 5 minutes). It is what picks up provider drift the watches miss.
const DefaultRequeueInterval = 5 * time.Minute

// Options tune the Drifted condition controller. The zero value means the defaults.
type Options struct {
	// RequeueInterval is how often a launched NodeClaim is checked again without a change. Zero
	// means DefaultRequeueInterval.
	RequeueInterval time.Duration
	// MaxConcurrentReconciles bounds parallel reconciles. Zero means
	// defaults.MaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// NodeClassKinds are the node class kinds whose spec changes re-check the NodeClaims that
	// reference them. Kinds the cluster does not serve are skipped at setup. Nil means
	// scheme.NodeClassKinds() (LocalNodeClass and EC2NodeClass); changes of other kinds
	// are seen at the next requeue.
	NodeClassKinds []schema.GroupVersionKind
}

func (o Options) withDefaults() Options {
	o.RequeueInterval = defaults.Positive(o.RequeueInterval, DefaultRequeueInterval)
	o.MaxConcurrentReconciles = defaults.Positive(o.MaxConcurrentReconciles, defaults.MaxConcurrentReconciles)
	if o.NodeClassKinds == nil {
		o.NodeClassKinds = scheme.NodeClassKinds()
	}
	return o
}

// Controller sets and removes the Drifted condition of NodeClaims.
type Controller struct {
	kube    client.Client
	cloud   cloudprovider.CloudProvider
	clock   clock.Clock
	metrics *Metrics
	opts    Options
	status  *statusreconcile.Reconciler[*karpv1.NodeClaim]
}

// NewController returns the Drifted condition controller. kube should be a manager's cached
// client; cloud answers step 3 (IsDrifted); reg receives karpenter_nodeclaims_drifted_total (nil
// skips it). A nil clock means the real clock.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, clk clock.Clock, reg prometheus.Registerer, opts Options) (*Controller, error) {
	if cloud == nil {
		return nil, fmt.Errorf("new %s controller: a cloud provider is required", ControllerName)
	}
	clk = defaults.Clock(clk)
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("new %s controller: %w", ControllerName, err)
	}
	c := &Controller{kube: kube, cloud: cloud, clock: clk, metrics: m, opts: opts.withDefaults()}
	c.status = statusreconcile.NodeClaimsByPool(kube, c.decide)
	return c, nil
}

// Reconcile brings one NodeClaim's Drifted condition up to date. NodeClaims being deleted, and
// NodeClaims without a NodePool, are left as they are.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return c.status.Reconcile(ctx, req)
}

// decide sets or removes the Drifted condition of a NodeClaim that is not being deleted.
func (c *Controller) decide(ctx context.Context, nc *karpv1.NodeClaim, np *karpv1.NodePool) (statusreconcile.Outcome, error) {
	if np == nil {
		return statusreconcile.Outcome{}, nil
	}
	wasDrifted := isTrue(nc, karpv1.ConditionTypeDrifted)
	// Launching sets Launched, which brings the NodeClaim back here: only launched NodeClaims
	// need a periodic look.
	launched := isTrue(nc, karpv1.ConditionTypeLaunched)
	result := reconcile.Result{}
	var reason cloudprovider.DriftReason
	if launched {
		result.RequeueAfter = c.opts.RequeueInterval
		var err error
		reason, err = c.driftReason(ctx, np, nc)
		if err != nil {
			if cloudprovider.IsNodeClaimNotFound(err) {
				// The instance is gone; garbage collection and the lifecycle controller take it
				// from here.
				return statusreconcile.Outcome{}, nil
			}
			return statusreconcile.Outcome{}, err
		}
	}
	if reason != "" {
		nc.SetCondition(c.clock.Now(), karpv1.ConditionTypeDrifted, metav1.ConditionTrue, string(reason), string(reason))
	} else {
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeDrifted)
	}
	return statusreconcile.Outcome{Result: result, Stored: func(ctx context.Context) {
		switch {
		case reason != "" && !wasDrifted:
			log.FromContext(ctx).V(1).Info("marking drifted", "nodeclaim", nc.Name, "reason", string(reason))
			c.metrics.drifted(nc, reason)
		case reason != "":
			log.FromContext(ctx).V(1).Info("drift reason changed", "nodeclaim", nc.Name, "reason", string(reason))
		case !launched:
			log.FromContext(ctx).V(1).Info("removing drifted status condition, not launched", "nodeclaim", nc.Name)
		default:
			log.FromContext(ctx).V(1).Info("removing drifted status condition, not drifted", "nodeclaim", nc.Name)
		}
	}}, nil
}

// driftReason returns why the launched NodeClaim drifted from its NodePool or node class, or ""
// when it did not. The cheap checks come first; the provider is asked only when they find
// nothing.
func (c *Controller) driftReason(ctx context.Context, np *karpv1.NodePool, nc *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	if reason := staticDrift(np, nc); reason != "" {
		return reason, nil
	}
	reason, err := requirementsDrift(np, nc)
	if err != nil || reason != "" {
		return reason, err
	}
	reason, err = c.cloud.IsDrifted(ctx, nc)
	if err != nil {
		return "", fmt.Errorf("check provider drift of nodeclaim %s: %w", nc.Name, err)
	}
	return reason, nil
}

// isTrue reports whether the NodeClaim's condition of the type is True.
func isTrue(nc *karpv1.NodeClaim, conditionType string) bool {
	c := nc.StatusCondition(conditionType)
	return c != nil && c.Status == metav1.ConditionTrue
}

// SetupWithManager registers the controller with mgr. It watches NodeClaims; NodePools whose
// spec or annotations change (the hash controller writes the new hash after the spec changes),
// which enqueue their NodeClaims; and the spec of the node classes of Options.NodeClassKinds the
// cluster serves, which enqueue the NodeClaims that reference them.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	w := statusreconcile.PoolWatch{Name: ControllerName, MaxConcurrentReconciles: c.opts.MaxConcurrentReconciles,
		PoolChanged: predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}),
		Extend: func(b *builder.Builder) (*builder.Builder, error) {
			return nodeclasswatch.Served(b, mgr.GetRESTMapper(), mgr.GetLogger().WithName(ControllerName), c.opts.NodeClassKinds, c.nodeClaimsOfNodeClass, predicate.GenerationChangedPredicate{})
		}}
	return w.SetupWithManager(mgr, c.kube, c)
}

// nodeClaimsOfNodeClass maps a node class of kind gk to the NodeClaims whose spec.nodeClassRef
// names it.
func (c *Controller) nodeClaimsOfNodeClass(gk schema.GroupKind) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var ncs karpv1.NodeClaimList
		if err := c.kube.List(ctx, &ncs); err != nil {
			log.FromContext(ctx).Error(err, "map node class to nodeclaims", "kind", gk.String(), "name", o.GetName())
			return nil
		}
		var reqs []reconcile.Request
		for i := range ncs.Items {
			ref := ncs.Items[i].Spec.NodeClassRef
			if ref != nil && ref.GroupKind() == gk && ref.Name == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ncs.Items[i])})
			}
		}
		return reqs
	}
}
