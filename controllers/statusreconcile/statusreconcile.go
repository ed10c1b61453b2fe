// Package statusreconcile is the one reconcile skeleton of the controllers that keep part of an
// object's status up to date: get the object (gone: done), skip it while it is being deleted,
// for a NodeClaim look up its NodePool (NodeClaimsByPool), compute the new status with the
// controller's decision function, and patch the status with an
// optimistic lock only when it changed. A patch that loses a race with another writer is retried
// after ConflictRetry with one log line; an object that went away meanwhile is done. Conflict and
// not-found handling therefore live here and nowhere else.
//
// It decides nothing about any status: each controller passes its decision in. It holds no state
// between reconciles. PoolWatch and Complete are the matching wiring: Complete is the last step of
// setting up any controller-runtime controller here (its concurrency bound and its setup error).
package statusreconcile

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/nodepoolref"
)

// ConflictRetry is how soon a reconcile whose status patch lost an optimistic-concurrency race
// runs again, to judge the object afresh.
const ConflictRetry = 100 * time.Millisecond

// Decision computes an object's new status in memory. Besides its status it may change nothing of
// the object; it may act on it instead (delete it, say) and then leave the status as it is. An
// error aborts the reconcile without a patch.
type Decision[T client.Object] func(ctx context.Context, obj T) (Outcome, error)

// Outcome is what a Decision returns besides the status it computed.
type Outcome struct {
	// Result says when to look again.
	Result reconcile.Result
	// Stored, if set, runs only after the changed status was patched: for the logs, metrics and
	// Events that must follow a change that was stored, and only that.
	Stored func(ctx context.Context)
}

// Reconciler is the skeleton for objects of type T. Every field but IncludeDeleting is required.
type Reconciler[T client.Object] struct {
	// Kube reads the object and patches its status.
	Kube client.Client
	// Kind names the object in errors, e.g. "nodeclaim".
	Kind string
	// New returns an empty object to read into.
	New func() T
	// Status returns the part of the object Decide may change, compared before and after with
	// equality.Semantic to decide whether to patch (for example &nc.Status).
	Status func(T) any
	// Decide is the controller's decision.
	Decide Decision[T]
	// IncludeDeleting makes objects being deleted reconciled too; by default they are left alone.
	IncludeDeleting bool
}

// Reconcile runs the skeleton for the object req names.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.New()
	if err := r.Kube.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("get %s %s: %w", r.Kind, req.Name, err)
	}
	if !r.IncludeDeleting && !obj.GetDeletionTimestamp().IsZero() {
		return reconcile.Result{}, nil
	}
	stored := obj.DeepCopyObject().(T)
	out, err := r.Decide(ctx, obj)
	if err != nil {
		return reconcile.Result{}, err
	}
	if equality.Semantic.DeepEqual(r.Status(stored), r.Status(obj)) {
		return out.Result, nil
	}
	retry, patched, err := PatchStatus(ctx, r.Kube, r.Kind, stored, obj)
	if !patched {
		return retry, err
	}
	if out.Stored != nil {
		out.Stored(ctx)
	}
	return out.Result, nil
}

// PatchStatus patches obj's status with the difference from stored, under an optimistic lock on
// stored's resourceVersion. It reports whether the patch was stored. When it was not: an object
// that no longer exists gives a zero result and no error; a conflicting write gives a requeue after
// ConflictRetry (logged once, at V(1)); any other failure gives an error naming kind and object.
func PatchStatus(ctx context.Context, kube client.Client, kind string, stored, obj client.Object) (reconcile.Result, bool, error) {
	err := kube.Status().Patch(ctx, obj, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
	return outcomeOf(ctx, err, kind+" "+obj.GetName()+" status")
}

// PatchObject is PatchStatus for the object itself (metadata and spec) rather than its status
// subresource.
func PatchObject(ctx context.Context, kube client.Client, kind string, stored, obj client.Object) (reconcile.Result, bool, error) {
	err := kube.Patch(ctx, obj, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
	return outcomeOf(ctx, err, kind+" "+obj.GetName())
}

// outcomeOf sorts the error of an optimistic-lock patch of what: stored, gone, conflict or failed.
func outcomeOf(ctx context.Context, err error, what string) (reconcile.Result, bool, error) {
	switch {
	case err == nil:
		return reconcile.Result{}, true, nil
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, false, nil
	case apierrors.IsConflict(err):
		log.FromContext(ctx).V(1).Info("retrying after a conflicting write", "object", what, "error", err.Error())
		return reconcile.Result{RequeueAfter: ConflictRetry}, false, nil
	default:
		return reconcile.Result{}, false, fmt.Errorf("patch %s: %w", what, err)
	}
}

// NodeClaims returns the skeleton for the status of NodeClaims, with decide as the decision.
func NodeClaims(kube client.Client, decide Decision[*karpv1.NodeClaim]) *Reconciler[*karpv1.NodeClaim] {
	return &Reconciler[*karpv1.NodeClaim]{
		Kube: kube, Kind: "nodeclaim", Decide: decide,
		New:    func() *karpv1.NodeClaim { return &karpv1.NodeClaim{} },
		Status: func(nc *karpv1.NodeClaim) any { return &nc.Status },
	}
}

// PoolDecision decides a NodeClaim's status given its NodePool: the one its karpenter.sh/nodepool
// label names, or nil when it has no label or that NodePool does not exist.
type PoolDecision func(ctx context.Context, nc *karpv1.NodeClaim, np *karpv1.NodePool) (Outcome, error)

// NodeClaimsByPool returns the skeleton for the status of NodeClaims whose decision depends on
// their NodePool: the skeleton looks the NodePool up (a failed lookup is returned, and retried)
// before it calls decide.
func NodeClaimsByPool(kube client.Client, decide PoolDecision) *Reconciler[*karpv1.NodeClaim] {
	return NodeClaims(kube, func(ctx context.Context, nc *karpv1.NodeClaim) (Outcome, error) {
		np, err := nodepoolref.NodePool(ctx, kube, nc)
		if err != nil {
			return Outcome{}, err
		}
		return decide(ctx, nc, np)
	})
}

// PoolWatch wires a NodeClaim controller whose decision depends on the NodeClaim's NodePool (see
// NodeClaimsByPool) into a manager.
type PoolWatch struct {
	// Name names the controller (logs, metrics, errors).
	Name string
	// MaxConcurrentReconciles bounds parallel reconciles.
	MaxConcurrentReconciles int
	// PoolChanged selects the NodePool changes that reconcile every NodeClaim of that NodePool.
	PoolChanged predicate.Predicate
	// Extend, when set, adds watches to the builder before it is completed.
	Extend func(*builder.Builder) (*builder.Builder, error)
}

// SetupWithManager adds r to mgr as the controller w describes: it reconciles NodeClaims, and the
// NodeClaims labelled with a NodePool (read through kube) when that NodePool changes as
// w.PoolChanged passes. Errors name the controller.
func (w PoolWatch) SetupWithManager(mgr ctrl.Manager, kube client.Reader, r reconcile.Reconciler) error {
	b := ctrl.NewControllerManagedBy(mgr).
		Named(w.Name).
		For(&karpv1.NodeClaim{}).
		Watches(&karpv1.NodePool{}, handler.EnqueueRequestsFromMapFunc(nodepoolref.NodeClaimRequests(kube)),
			builder.WithPredicates(w.PoolChanged))
	if w.Extend != nil {
		var err error
		if b, err = w.Extend(b); err != nil {
			return fmt.Errorf("set up %s controller: %w", w.Name, err)
		}
	}
	return Complete(b, w.Name, w.MaxConcurrentReconciles, r)
}

// Complete builds b into the controller name that reconciles with r, at most maxConcurrent
// reconciles at once. Its error names the controller.
func Complete(b *builder.Builder, name string, maxConcurrent int, r reconcile.Reconciler) error {
	err := b.WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrent}).Complete(r)
	if err != nil {
		return fmt.Errorf("set up %s controller: %w", name, err)
	}
	return nil
}
