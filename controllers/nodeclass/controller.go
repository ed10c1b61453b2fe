// Package nodeclass keeps the status of LocalNodeClasses current: it resolves each class's region
// and zones against the embedded catalog, records the zones in status.zones, and reports the
// outcome in the Ready condition, naming the offending field and the valid values when the class
// does not resolve.
//
// It writes only LocalNodeClass status: it must not launch instances, touch Nodes or NodePools,
// or change a class's spec.
package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	"github.com/joiner-dev/joiner/cloudprovider/catalog"
	"github.com/joiner-dev/joiner/cloudprovider/local"
)

// Reasons of the Ready condition of a LocalNodeClass.
const (
	// ReasonResolved means the region and zones exist in the catalog.
	ReasonResolved = "Resolved"
	// ReasonRegionNotFound means spec.region is not a region of the catalog.
	ReasonRegionNotFound = local.ReasonRegionNotFound
	// ReasonZoneNotFound means an entry of spec.zones is not a zone of the region.
	ReasonZoneNotFound = local.ReasonZoneNotFound
)

// Options configure a Controller. Zero fields take the documented defaults.
type Options struct {
	// Catalog resolves regions and zones; nil means catalog.Load().
	Catalog *catalog.Catalog
	// Clock stamps condition transitions; nil means the real clock.
	Clock clock.PassiveClock
}

// Controller reconciles the status of LocalNodeClasses.
type Controller struct {
	kube    client.Client
	catalog *catalog.Catalog
	clock   clock.PassiveClock
}

// New returns a Controller that reads and writes LocalNodeClasses through kube.
func New(kube client.Client, opts Options) (*Controller, error) {
	if kube == nil {
		return nil, errors.New("new nodeclass controller: a Kubernetes client is required")
	}
	c := &Controller{kube: kube, catalog: opts.Catalog, clock: opts.Clock}
	if c.catalog == nil {
		cat, err := catalog.Load()
		if err != nil {
			return nil, fmt.Errorf("new nodeclass controller: load the instance type catalog: %w", err)
		}
		c.catalog = cat
	}
	if c.clock == nil {
		c.clock = clock.RealClock{}
	}
	return c, nil
}

// SetupWithManager registers the controller with the manager, watching LocalNodeClasses.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("localnodeclass-status").
		For(&joinerv1alpha1.LocalNodeClass{}).
		Complete(c)
}

// Reconcile resolves one LocalNodeClass and writes status.zones and the Ready condition when
// they changed.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	nc := &joinerv1alpha1.LocalNodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get LocalNodeClass %s: %w", req.Name, err)
	}
	if !nc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	want := c.status(nc)
	if equality.Semantic.DeepEqual(nc.Status, want) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
	nc.Status = want
	if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			// The change that made the patch conflict triggers another reconcile; a deleted
			// class needs no status.
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("update status of LocalNodeClass %s: %w", nc.Name, err)
	}
	ready := meta.FindStatusCondition(want.Conditions, joinerv1alpha1.ConditionReady)
	log.FromContext(ctx).Info("updated LocalNodeClass status", "ready", ready.Status, "reason", ready.Reason, "zones", want.Zones)
	return ctrl.Result{}, nil
}

// status returns the status the class should have: the resolved zones and a Ready condition for
// its current generation. Unchanged conditions keep their transition time.
func (c *Controller) status(nc *joinerv1alpha1.LocalNodeClass) joinerv1alpha1.LocalNodeClassStatus {
	out := joinerv1alpha1.LocalNodeClassStatus{Conditions: slices.Clone(nc.Status.Conditions)}
	cond := metav1.Condition{
		Type:               joinerv1alpha1.ConditionReady,
		ObservedGeneration: nc.Generation,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
	}
	resolved, err := local.Resolve(c.catalog, nc)
	var ncErr *local.NodeClassError
	switch {
	case err == nil:
		out.Zones = resolved.Zones
		cond.Status = metav1.ConditionTrue
		cond.Reason = ReasonResolved
		cond.Message = fmt.Sprintf("region %s with %d zones", resolved.Region, len(resolved.Zones))
	case errors.As(err, &ncErr):
		cond.Status = metav1.ConditionFalse
		cond.Reason = ncErr.Reason
		cond.Message = ncErr.Error()
	default:
		cond.Status = metav1.ConditionFalse
		cond.Reason = "ResolveFailed"
		cond.Message = err.Error()
	}
	meta.SetStatusCondition(&out.Conditions, cond)
	return out
}
