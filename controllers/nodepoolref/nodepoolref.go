// Package nodepoolref follows the karpenter.sh/nodepool label between NodeClaims and their
// NodePool, for the controllers that act on a NodeClaim by its NodePool's settings and must be
// woken when those settings change.
package nodepoolref

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// NodePool returns the NodePool named by the NodeClaim's karpenter.sh/nodepool label, or nil when
// there is no label or no such NodePool.
func NodePool(ctx context.Context, r client.Reader, nc *karpv1.NodeClaim) (*karpv1.NodePool, error) {
	name := nc.Labels[karpv1.NodePoolLabelKey]
	if name == "" {
		return nil, nil
	}
	np := &karpv1.NodePool{}
	if err := r.Get(ctx, client.ObjectKey{Name: name}, np); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get nodepool %s of nodeclaim %s: %w", name, nc.Name, err)
	}
	return np, nil
}

// NodeClaimRequests maps a NodePool to reconcile requests for the NodeClaims labelled with it. A
// failed list is logged and maps to nothing.
func NodeClaimRequests(r client.Reader) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var ncs karpv1.NodeClaimList
		if err := r.List(ctx, &ncs, client.MatchingLabels{karpv1.NodePoolLabelKey: o.GetName()}); err != nil {
			log.FromContext(ctx).Error(err, "map nodepool to nodeclaims", "nodepool", o.GetName())
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(ncs.Items))
		for i := range ncs.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&ncs.Items[i])})
		}
		return reqs
	}
}

// NodePoolRequest maps a NodeClaim to a reconcile request for the NodePool its karpenter.sh/nodepool
// label names, or to nothing without that label.
func NodePoolRequest(_ context.Context, o client.Object) []reconcile.Request {
	name := o.GetLabels()[karpv1.NodePoolLabelKey]
	if name == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: name}}}
}
