// Package fieldindex defines the cache field indexes the NodeClaim lifecycle, garbage collection
// and termination controllers share (Nodes and NodeClaims by provider ID), and the lookups that
// use them. It only reads; it must not change objects or hold controller logic.
package fieldindex

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// NodeProviderID is the field index of Nodes by spec.providerID.
const NodeProviderID = "spec.providerID"

// NodeClaimProviderID is the field index of NodeClaims by status.providerID.
const NodeClaimProviderID = "status.providerID"

// Register adds both indexes to indexer (a manager's GetFieldIndexer()). Registering an index
// that another component already registered under the same name is not an error: the names
// above mean the same field wherever they are used.
func Register(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Node{}, NodeProviderID, func(o client.Object) []string {
		n, ok := o.(*corev1.Node)
		if !ok || n.Spec.ProviderID == "" {
			return nil
		}
		return []string{n.Spec.ProviderID}
	}); err != nil && !isConflict(err) {
		return fmt.Errorf("index nodes by %s: %w", NodeProviderID, err)
	}
	if err := indexer.IndexField(ctx, &karpv1.NodeClaim{}, NodeClaimProviderID, func(o client.Object) []string {
		nc, ok := o.(*karpv1.NodeClaim)
		if !ok || nc.Status.ProviderID == "" {
			return nil
		}
		return []string{nc.Status.ProviderID}
	}); err != nil && !isConflict(err) {
		return fmt.Errorf("index nodeclaims by %s: %w", NodeClaimProviderID, err)
	}
	return nil
}

// isConflict reports client-go's "indexer conflict" error, returned when an index of the same
// name is already registered on the informer.
func isConflict(err error) bool {
	return strings.Contains(err.Error(), "indexer conflict")
}

// NodesForProviderID returns the Nodes whose spec.providerID is providerID (normally zero or one).
// An empty providerID matches nothing.
func NodesForProviderID(ctx context.Context, r client.Reader, providerID string) ([]corev1.Node, error) {
	if providerID == "" {
		return nil, nil
	}
	var nodes corev1.NodeList
	if err := r.List(ctx, &nodes, client.MatchingFields{NodeProviderID: providerID}); err != nil {
		return nil, fmt.Errorf("list nodes with provider id %s: %w", providerID, err)
	}
	return nodes.Items, nil
}

// NodeClaimsForProviderID returns the NodeClaims whose status.providerID is providerID (normally
// zero or one). An empty providerID matches nothing.
func NodeClaimsForProviderID(ctx context.Context, r client.Reader, providerID string) ([]karpv1.NodeClaim, error) {
	if providerID == "" {
		return nil, nil
	}
	var ncs karpv1.NodeClaimList
	if err := r.List(ctx, &ncs, client.MatchingFields{NodeClaimProviderID: providerID}); err != nil {
		return nil, fmt.Errorf("list nodeclaims with provider id %s: %w", providerID, err)
	}
	return ncs.Items, nil
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
