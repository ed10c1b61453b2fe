// Package fieldindex defines the cache field indexes the NodeClaim lifecycle, garbage collection
// and termination controllers share (Nodes and NodeClaims by provider ID), the lookups that use
// them, Index, which registers any such index, and SetupNodeClaimController, the wiring of a
// controller that reconciles NodeClaims and follows their Nodes through the index. It only reads; it must not change objects or hold controller logic.
package fieldindex

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
)

// NodeProviderID is the field index of Nodes by spec.providerID.
const NodeProviderID = "spec.providerID"

// NodeClaimProviderID is the field index of NodeClaims by status.providerID.
const NodeClaimProviderID = "status.providerID"

// Register adds both indexes to indexer (a manager's GetFieldIndexer()). Registering an index
// that another component already registered under the same name is not an error: the names
// above mean the same field wherever they are used.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	if err := Index(ctx, indexer, &corev1.Node{}, "nodes", NodeProviderID, func(n *corev1.Node) string { return n.Spec.ProviderID }); err != nil {
		return err
	}
	return Index(ctx, indexer, &karpv1.NodeClaim{}, "nodeclaims", NodeClaimProviderID,
		func(nc *karpv1.NodeClaim) string { return nc.Status.ProviderID })
}

// Index registers the field index field on indexer for objects of obj's type (what, in the
// error): an object is indexed under value's result, and not at all when that is empty.
// Registering an index that another component already registered under the same name is not an
// error.
func Index[T client.Object](ctx context.Context, indexer client.FieldIndexer, obj T, what, field string, value func(T) string) error {
	err := indexer.IndexField(ctx, obj, field, IndexerFunc(value))
	if err != nil && !isConflict(err) {
		return fmt.Errorf("index %s by %s: %w", what, field, err)
	}
	return nil
}

// IndexerFunc returns the index function of Index: an object of type T is indexed under value's
// result, and not at all when that is empty; an object of another type is not indexed. Tests
// building a fake client register it with WithIndex.
func IndexerFunc[T client.Object](value func(T) string) client.IndexerFunc {
	return func(o client.Object) []string {
		if t, ok := o.(T); ok {
			if v := value(t); v != "" {
				return []string{v}
			}
		}
		return nil
	}
}

// isConflict reports client-go's "indexer conflict" error, returned when an index of the same
// name is already registered on the informer.
func isConflict(err error) bool {
	return strings.Contains(err.Error(), "indexer conflict")
}

// NodesForProviderID returns the Nodes whose spec.providerID is providerID (normally zero or one).
// An empty providerID matches nothing.
func NodesForProviderID(ctx context.Context, r client.Reader, providerID string) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	if err := listByProviderID(ctx, r, &nodes, "nodes", NodeProviderID, providerID); err != nil {
		return nil, err
	}
	return nodes.Items, nil
}

// NodeClaimsForProviderID returns the NodeClaims whose status.providerID is providerID (normally
// zero or one). An empty providerID matches nothing.
func NodeClaimsForProviderID(ctx context.Context, r client.Reader, providerID string) ([]karpv1.NodeClaim, error) {
	var ncs karpv1.NodeClaimList
	if err := listByProviderID(ctx, r, &ncs, "nodeclaims", NodeClaimProviderID, providerID); err != nil {
		return nil, err
	}
	return ncs.Items, nil
}

// listByProviderID lists into list the objects (what, in the error) whose provider ID, indexed as
// field, is providerID. An empty providerID lists nothing.
func listByProviderID(ctx context.Context, r client.Reader, list client.ObjectList, what, field, providerID string) error {
	if providerID == "" {
		return nil
	}
	if err := r.List(ctx, list, client.MatchingFields{field: providerID}); err != nil {
		return fmt.Errorf("list %s with provider id %s: %w", what, providerID, err)
	}
	return nil
}

// NodeClaimRequestsForNode returns a handler map function that enqueues the NodeClaims carrying a
// Node's provider ID, for controllers that watch Nodes on behalf of NodeClaims.
func NodeClaimRequestsForNode(r client.Reader) handler.MapFunc {
	return requestsByProviderID(r, "map node to nodeclaims", "node",
		func(n *corev1.Node) string { return n.Spec.ProviderID }, NodeClaimsForProviderID)
}

// NodeRequestsForNodeClaim returns a handler map function that enqueues the Nodes carrying a
// NodeClaim's provider ID, for controllers that watch NodeClaims on behalf of Nodes (so that a
// Node waiting for its NodeClaim is looked at again when the NodeClaim changes or goes).
func NodeRequestsForNodeClaim(r client.Reader) handler.MapFunc {
	return requestsByProviderID(r, "map nodeclaim to nodes", "nodeclaim",
		func(nc *karpv1.NodeClaim) string { return nc.Status.ProviderID }, NodesForProviderID)
}

// requestsByProviderID returns a map function that, for an object of type S, enqueues the objects
// find returns for its provider ID. A lookup error is logged with msg and the object's name under
// key, and enqueues nothing.
func requestsByProviderID[S client.Object, T any, PT interface {
	*T
	client.Object
}](r client.Reader, msg, key string, providerID func(S) string, find func(context.Context, client.Reader, string) ([]T, error)) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		src, ok := o.(S)
		if !ok {
			return nil
		}
		objs, err := find(ctx, r, providerID(src))
		if err != nil {
			log.FromContext(ctx).Error(err, msg, key, src.GetName())
			return nil
		}
		return requestsFor[T, PT](objs)
	}
}

// requestsFor returns a reconcile request for each of objs.
func requestsFor[T any, PT interface {
	*T
	client.Object
}](objs []T) []reconcile.Request {
	reqs := make([]reconcile.Request, 0, len(objs))
	for i := range objs {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(PT(&objs[i]))})
	}
	return reqs
}

// SetupNodeClaimController registers the provider-ID indexes and adds r to mgr as the controller
// name, with at most maxConcurrent reconciles at once. It reconciles NodeClaims and, when a Node
// changes as nodePreds pass (every change without any), the NodeClaims carrying its provider ID
// (looked up through kube).
func SetupNodeClaimController(mgr ctrl.Manager, name string, kube client.Reader, maxConcurrent int, r reconcile.Reconciler, nodePreds ...predicate.Predicate) error {
	if err := Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(&karpv1.NodeClaim{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(NodeClaimRequestsForNode(kube)), builder.WithPredicates(nodePreds...))
	return statusreconcile.Complete(b, name, maxConcurrent, r)
}
