package local

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
	"github.com/joiner-dev/joiner/providers/catalog"
)

// ReasonResolved is the reason of Ready=True on a LocalNodeClass: its region and zones exist in
// the catalog. Ready=False carries the NodeClassError's reason (ReasonRegionNotFound,
// ReasonZoneNotFound).
const ReasonResolved = "Resolved"

// NodeClassControllerName names the LocalNodeClass status controller (logs, metrics).
const NodeClassControllerName = "localnodeclass.status"

// NodeClassController keeps the status of LocalNodeClasses current: it resolves each class's
// region and zones against the catalog, records the zones in status.zones, and reports the
// outcome in the Ready condition, naming the offending field and the valid values when the class
// does not resolve. It writes only LocalNodeClass status: it never launches instances, touches
// Nodes or NodePools, or changes a class's spec.
type NodeClassController struct {
	kube    client.Client
	catalog *catalog.Catalog
	clock   clock.PassiveClock
}

// NewNodeClassController returns a controller that reads and writes LocalNodeClasses through
// kube and resolves them against cat. A nil clock means the real clock.
func NewNodeClassController(kube client.Client, cat *catalog.Catalog, clk clock.PassiveClock) (*NodeClassController, error) {
	if kube == nil {
		return nil, errors.New("new LocalNodeClass controller: a Kubernetes client is required")
	}
	if cat == nil {
		return nil, errors.New("new LocalNodeClass controller: a catalog is required")
	}
	clk = defaults.Clock(clk)
	return &NodeClassController{kube: kube, catalog: cat, clock: clk}, nil
}

// SetupWithManager registers the controller with the manager, watching LocalNodeClasses.
func (c *NodeClassController) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(NodeClassControllerName).
		For(&joinerv1alpha1.LocalNodeClass{}).
		Complete(c)
}

// Reconcile resolves one LocalNodeClass and writes status.zones and the Ready condition when
// they changed. Classes being deleted are left alone.
func (c *NodeClassController) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r := &statusreconcile.Reconciler[*joinerv1alpha1.LocalNodeClass]{
		Kube: c.kube, Kind: "LocalNodeClass",
		New:    func() *joinerv1alpha1.LocalNodeClass { return &joinerv1alpha1.LocalNodeClass{} },
		Status: func(nc *joinerv1alpha1.LocalNodeClass) any { return &nc.Status },
		Decide: c.decide,
	}
	return r.Reconcile(ctx, req)
}

// decide computes the class's status; once it is stored, the outcome logs it.
func (c *NodeClassController) decide(_ context.Context, nc *joinerv1alpha1.LocalNodeClass) (statusreconcile.Outcome, error) {
	want := c.status(nc)
	nc.Status = want
	return statusreconcile.Outcome{Stored: func(ctx context.Context) {
		ready := meta.FindStatusCondition(want.Conditions, joinerv1alpha1.ConditionReady)
		log.FromContext(ctx).Info("updated LocalNodeClass status", "ready", ready.Status, "reason", ready.Reason, "zones", want.Zones)
	}}, nil
}

// status returns the status the class should have: the resolved zones and a Ready condition for
// its current generation. Unchanged conditions keep their transition time.
func (c *NodeClassController) status(nc *joinerv1alpha1.LocalNodeClass) joinerv1alpha1.LocalNodeClassStatus {
	out := joinerv1alpha1.LocalNodeClassStatus{Conditions: slices.Clone(nc.Status.Conditions)}
	cond := metav1.Condition{
		Type:               joinerv1alpha1.ConditionReady,
		ObservedGeneration: nc.Generation,
		LastTransitionTime: metav1.NewTime(c.clock.Now()),
	}
	resolved, err := Resolve(c.catalog, nc)
	var ncErr *NodeClassError
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
