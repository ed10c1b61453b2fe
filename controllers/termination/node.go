package termination

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
	"github.com/joiner-dev/joiner/controllers/nodepredicates"
)

// nodeReconciler handles Nodes that are being deleted with the termination finalizer. A Node with
// a NodeClaim is handed to the NodeClaim's termination (its NodeClaim is deleted, and the
// NodeClaim flow releases the Node). A Node without one is terminated here: tainted, drained,
// its instance terminated, then released.
type nodeReconciler struct {
	*Controller
}

// Reconcile runs one pass for a Node.
func (r *nodeReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := r.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if node.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("node", node.Name, "providerID", node.Spec.ProviderID))
	ncs, err := fieldindex.NodeClaimsForProviderID(ctx, r.kube, node.Spec.ProviderID)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(ncs) > 0 {
		// The NodeClaim's termination drains and releases this Node.
		for i := range ncs {
			if ncs[i].DeletionTimestamp.IsZero() {
				if err := r.followNodeDeletion(ctx, &ncs[i], []corev1.Node{*node}); err != nil {
					return reconcile.Result{}, err
				}
			}
		}
		return reconcile.Result{}, nil
	}
	result, err := r.terminateOrphan(ctx, node)
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: r.opts.PollInterval / 10}, nil
	}
	return result, err
}

// terminateOrphan drains a Node that has no NodeClaim, waits until the drained pods' volumes are
// detached (it has no terminationGracePeriod), terminates its instance and releases it.
func (r *nodeReconciler) terminateOrphan(ctx context.Context, node *corev1.Node) (reconcile.Result, error) {
	if err := taintForTermination(ctx, r.kube, node); err != nil {
		return reconcile.Result{}, err
	}
	// The instance is looked at only when the Node is NotReady: a gone instance means nothing runs.
	instance := &karpv1.NodeClaim{Status: karpv1.NodeClaimStatus{ProviderID: node.Spec.ProviderID, NodeName: node.Name}}
	if nodepredicates.NodeReady(node) || node.Spec.ProviderID == "" || !r.nothingToDrain(ctx, instance, node) {
		res, err := r.drainer.Drain(ctx, node, nil)
		if err != nil {
			return reconcile.Result{}, err
		}
		if !res.Drained() {
			log.FromContext(ctx).V(1).Info("draining node", "waiting", summarize(res.Waiting, 5))
			return reconcile.Result{RequeueAfter: r.opts.PollInterval}, nil
		}
		volumes, err := r.awaitNodeVolumes(ctx, node, r.clock.Now())
		if err != nil {
			return reconcile.Result{}, err
		}
		if len(volumes) > 0 {
			return reconcile.Result{RequeueAfter: r.opts.VolumePollInterval}, nil
		}
	}
	if node.Spec.ProviderID != "" {
		err := r.cloud.Delete(ctx, instance)
		if err == nil {
			return reconcile.Result{RequeueAfter: r.opts.PollInterval}, nil
		}
		if !cloudprovider.IsNodeClaimNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("terminate instance %s of node %s: %w", node.Spec.ProviderID, node.Name, err)
		}
	}
	if err := releaseNode(ctx, r.kube, node); err != nil {
		return reconcile.Result{}, err
	}
	r.metrics.nodeTerminated(node, r.clock.Now())
	r.recorder.Eventf(node, nil, corev1.EventTypeNormal, ReasonTerminated, "Terminate", "Drained, instance %s terminated", node.Spec.ProviderID)
	log.FromContext(ctx).Info("terminated node without nodeclaim")
	return reconcile.Result{}, nil
}
