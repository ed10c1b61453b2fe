package nodeclaim

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// finalizer is the first stage: it adds the termination finalizer, so that deleting a NodeClaim
// always goes through termination (drain, then instance termination) before the object goes.
type finalizer struct{}

// Reconcile adds karpenter.sh/termination to the NodeClaim's finalizers.
func (f *finalizer) Reconcile(_ context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	controllerutil.AddFinalizer(nc, karpv1.TerminationFinalizer)
	return reconcile.Result{}, nil
}
