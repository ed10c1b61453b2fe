// Package nodepoolhash stamps every NodePool with the hash of its template (Hash) and the version
// of the hash scheme, in the annotations karpenter.sh/nodepool-hash and
// karpenter.sh/nodepool-hash-version, as Karpenter v1.14's NodePool hash controller does. When a
// NodePool's stored version differs from the current one, it first re-stamps the NodePool's
// NodeClaims, so that a change of the hash scheme never drifts nodes.
//
// It writes only those two annotations. It never sets conditions: package drift compares the
// NodePool's hash with its NodeClaims'.
package nodepoolhash

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"github.com/joiner-dev/joiner/controllers/defaults"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
)

// ControllerName is the name of the NodePool hash controller (logs, metrics).
const ControllerName = "nodepool.hash"

// Options tune the NodePool hash controller. The zero value means the defaults.
type Options struct {
	// MaxConcurrentReconciles bounds parallel reconciles. Zero means
	// defaults.MaxConcurrentReconciles.
	MaxConcurrentReconciles int
}

// Controller keeps the hash annotations of NodePools current.
type Controller struct {
	kube client.Client
	opts Options
}

// NewController returns the NodePool hash controller. kube should be a manager's cached client.
func NewController(kube client.Client, opts Options) *Controller {
	opts.MaxConcurrentReconciles = defaults.Positive(opts.MaxConcurrentReconciles, defaults.MaxConcurrentReconciles)
	return &Controller{kube: kube, opts: opts}
}

// Reconcile stamps one NodePool with its current hash and the current hash version, after
// re-stamping its NodeClaims when the NodePool's stored version is not the current one.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("get nodepool %s: %w", req.Name, err)
	}
	hash := np.Hash()
	if np.Annotations[karpv1.NodePoolHashVersionAnnotationKey] != karpv1.NodePoolHashVersion {
		// The NodePool's version is written only once every NodeClaim is re-stamped, so that a
		// failure here is retried rather than forgotten.
		conflict, err := c.restampNodeClaims(ctx, np, hash)
		if err != nil {
			return reconcile.Result{}, err
		}
		if conflict {
			return reconcile.Result{RequeueAfter: statusreconcile.ConflictRetry}, nil
		}
	}
	want := map[string]string{
		karpv1.NodePoolHashAnnotationKey:        hash,
		karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion,
	}
	if hasAll(np.Annotations, want) {
		return reconcile.Result{}, nil
	}
	stored := np.DeepCopy()
	np.Annotations = withAll(np.Annotations, want)
	// The optimistic lock keeps a hash computed from a template that has changed since from being
	// written over the new template.
	if retry, patched, err := statusreconcile.PatchObject(ctx, c.kube, "nodepool", stored, np); !patched {
		return retry, err
	}
	log.FromContext(ctx).V(1).Info("stamped nodepool hash", "hash", hash, "version", karpv1.NodePoolHashVersion)
	return reconcile.Result{}, nil
}

// restampNodeClaims brings the hash version of the NodePool's NodeClaims to the current one. The
// hash of the old scheme cannot be compared with the new one, so a NodeClaim that is not known to
// be drifted (it has no Drifted condition) takes the NodePool's current hash: it counts as built
// from the current template. One that is known to be drifted keeps its old hash, which stays
// different, so it stays drifted. It reports whether some NodeClaim changed under it (a conflict
// to retry).
func (c *Controller) restampNodeClaims(ctx context.Context, np *karpv1.NodePool, hash string) (bool, error) {
	var ncs karpv1.NodeClaimList
	if err := c.kube.List(ctx, &ncs, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		return false, fmt.Errorf("list nodeclaims of nodepool %s: %w", np.Name, err)
	}
	conflict := false
	var errs []error
	for i := range ncs.Items {
		nc := &ncs.Items[i]
		if nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey] == karpv1.NodePoolHashVersion {
			continue
		}
		want := map[string]string{karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}
		if nc.StatusCondition(karpv1.ConditionTypeDrifted) == nil {
			want[karpv1.NodePoolHashAnnotationKey] = hash
		}
		stored := nc.DeepCopy()
		nc.Annotations = withAll(nc.Annotations, want)
		// The optimistic lock makes sure that the Drifted condition read above is still the
		// NodeClaim's when the hash is written.
		err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			log.FromContext(ctx).V(1).Info("re-stamped nodeclaim hash version", "nodeclaim", nc.Name,
				"version", karpv1.NodePoolHashVersion, "hashUpdated", want[karpv1.NodePoolHashAnnotationKey] != "")
		case apierrors.IsNotFound(err):
		case apierrors.IsConflict(err):
			conflict = true
		default:
			errs = append(errs, fmt.Errorf("patch nodeclaim %s hash annotations: %w", nc.Name, err))
		}
	}
	return conflict, errors.Join(errs...)
}

// hasAll reports whether have holds every key of want with its value.
func hasAll(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// withAll returns a copy of m with the entries of add set.
func withAll(m, add map[string]string) map[string]string {
	out := make(map[string]string, len(m)+len(add))
	maps.Copy(out, m)
	maps.Copy(out, add)
	return out
}

// SetupWithManager registers the controller with mgr. It watches NodePools; its own writes come
// back as events that find nothing to do.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	b := ctrl.NewControllerManagedBy(mgr).Named(ControllerName).For(&karpv1.NodePool{})
	return statusreconcile.Complete(b, ControllerName, c.opts.MaxConcurrentReconciles, c)
}
