// Package nodepool keeps NodePool status current: status.resources and status.nodes add up the
// NodeClaims labelled with the NodePool (counter.go, with the arithmetic of package state), ValidationSucceeded reports the runtime
// validation the validating webhook also enforces (validation.go), and NodeClassReady and the root
// Ready follow the referenced node class (readiness.go). It only writes NodePool status; it never
// changes NodeClaims, Nodes or node classes.
package nodepool

import (
	"context"
	"fmt"
	"time"

	"github.com/joiner-dev/joiner/controllers/nodeclasswatch"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/controllers/nodepoolref"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
)

// ControllerName is the name of the NodePool status controller.
const ControllerName = "nodepool.status"

// DefaultResyncPeriod is how often every NodePool is recomputed even without a watched change
// (node classes of kinds that are not watched still get picked up).
const DefaultResyncPeriod = 5 * time.Minute

// Options tune the controller. The zero value means the defaults.
type Options struct {
	// NodeClassKinds are the node class kinds whose changes trigger the NodePools that reference
	// them. Kinds the cluster does not serve are skipped at setup. Nil means
	// scheme.NodeClassKinds(). Any kind can be referenced; unwatched ones are seen on resync.
	NodeClassKinds []schema.GroupVersionKind
	// ResyncPeriod is how often each NodePool is recomputed without a change. Zero means
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
}

func (o Options) withDefaults() Options {
	if o.NodeClassKinds == nil {
		o.NodeClassKinds = scheme.NodeClassKinds()
	}
	o.ResyncPeriod = defaults.Positive(o.ResyncPeriod, DefaultResyncPeriod)
	return o
}

// Controller reconciles NodePool status.
type Controller struct {
	kube    client.Client
	mapper  meta.RESTMapper
	clock   clock.Clock
	metrics *Metrics
	opts    Options
}

// NewController returns the NodePool status controller. kube reads NodePools and NodeClaims
// (cached) and node classes (as unstructured objects, which a manager's client reads from the API
// server); mapper resolves a nodeClassRef's group and kind (a manager's GetRESTMapper()); reg
// receives its metrics (nil skips them). A nil clock means the real clock.
func NewController(kube client.Client, mapper meta.RESTMapper, clk clock.Clock, reg prometheus.Registerer, opts Options) (*Controller, error) {
	clk = defaults.Clock(clk)
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Controller{kube: kube, mapper: mapper, clock: clk, metrics: m, opts: opts.withDefaults()}, nil
}

// Reconcile recomputes one NodePool's status and writes it when it changed.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		if apierrors.IsNotFound(err) {
			c.metrics.forget(req.Name)
		}
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	stored := np.DeepCopy()
	if err := c.count(ctx, np); err != nil {
		return reconcile.Result{}, err
	}
	c.metrics.observe(np)
	c.validate(np)
	if err := c.readiness(ctx, np); err != nil {
		return reconcile.Result{}, err
	}
	if !equality.Semantic.DeepEqual(stored.Status, np.Status) {
		if retry, patched, err := statusreconcile.PatchStatus(ctx, c.kube, "nodepool", stored, np); !patched {
			return retry, err
		}
	}
	return reconcile.Result{RequeueAfter: c.opts.ResyncPeriod}, nil
}

// SetupWithManager registers the controller: it watches NodePools, the NodeClaims labelled with
// them, and the node class kinds of Options.NodeClassKinds that the cluster serves.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&karpv1.NodePool{}).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(nodepoolref.NodePoolRequest))
	b, err := nodeclasswatch.Served(b, mgr.GetRESTMapper(), mgr.GetLogger().WithName(ControllerName), c.opts.NodeClassKinds, c.nodePoolsOfNodeClass)
	if err != nil {
		return fmt.Errorf("set up %s controller: %w", ControllerName, err)
	}
	if err := b.Complete(c); err != nil {
		return fmt.Errorf("set up %s controller: %w", ControllerName, err)
	}
	return nil
}

// nodePoolsOfNodeClass maps a node class of kind gk to the NodePools that reference it.
func (c *Controller) nodePoolsOfNodeClass(gk schema.GroupKind) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var nps karpv1.NodePoolList
		if err := c.kube.List(ctx, &nps); err != nil {
			log.FromContext(ctx).Error(err, "map node class to nodepools", "kind", gk.String(), "name", o.GetName())
			return nil
		}
		var reqs []reconcile.Request
		for i := range nps.Items {
			ref := nps.Items[i].Spec.Template.Spec.NodeClassRef
			if ref != nil && ref.GroupKind() == gk && ref.Name == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&nps.Items[i])})
			}
		}
		return reqs
	}
}
