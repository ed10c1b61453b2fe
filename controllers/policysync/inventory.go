package policysync

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/joiner-dev/joiner/policy"
)

// InventoryReconciler mirrors one kind of cluster object (NodePools or a node class) into the
// engine's data.inventory, so that policies can reason across objects. Every replica runs it.
type InventoryReconciler struct {
	Client client.Client
	Engine *policy.Engine
	// Object is an empty object of the mirrored kind, such as &karpv1.NodePool{}.
	Object client.Object

	gvk schema.GroupVersionKind
}

// SetupWithManager registers the reconciler for its kind.
func (r *InventoryReconciler) SetupWithManager(mgr ctrl.Manager) error {
	gvk, err := apiutil.GVKForObject(r.Object, mgr.GetScheme())
	if err != nil {
		return fmt.Errorf("inventory kind: %w", err)
	}
	r.gvk = gvk
	return ctrl.NewControllerManagedBy(mgr).
		Named("policy-inventory-" + gvk.Kind).
		For(r.Object).
		WithOptions(controllerOptions(false)).
		Complete(r)
}

// Reconcile copies the object into the inventory, or removes it once it is gone.
func (r *InventoryReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.Object.DeepCopyObject().(client.Object)
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			if err := r.Engine.DeleteInventory(ctx, r.gvk.GroupVersion().String(), r.gvk.Kind, req.Namespace, req.Name); err != nil {
				return ctrl.Result{}, fmt.Errorf("remove %s %s from inventory: %w", r.gvk.Kind, req.Name, err)
			}
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get %s %s: %w", r.gvk.Kind, req.Name, err)
	}
	u, err := policy.ObjectToMap(obj, r.gvk)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Engine.UpsertInventory(ctx, u); err != nil {
		return ctrl.Result{}, fmt.Errorf("add %s %s to inventory: %w", r.gvk.Kind, req.Name, err)
	}
	return ctrl.Result{}, nil
}

// controllerOptions makes a controller run on every replica when needLeader is false.
func controllerOptions(needLeader bool) controller.Options {
	return controller.Options{NeedLeaderElection: &needLeader}
}
