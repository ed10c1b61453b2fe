package nodeclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
	"github.com/joiner-dev/joiner/controllers/nodepredicates"
)

// ControllerName is the name of the lifecycle controller (logs, metrics, events).
const ControllerName = "nodeclaim.lifecycle"

// Default option values.
const (
	// DefaultRegistrationTTL is how long a launched NodeClaim may take to register its Node.
	DefaultRegistrationTTL = 15 * time.Minute
	// DefaultLaunchTTL is how long a NodeClaim may take to launch after it was created.
	DefaultLaunchTTL = 5 * time.Minute
	// DefaultInstanceNotFoundGrace is how long after launch an unregistered NodeClaim is spared
	// the check that its instance still exists.
	DefaultInstanceNotFoundGrace = 10 * time.Second
)

// Options tune the lifecycle controller. The zero value means the defaults above.
type Options struct {
	// RegistrationTTL is how long after launch a NodeClaim may stay unregistered before it is
	// deleted (and its instance terminated). Zero means DefaultRegistrationTTL.
	RegistrationTTL time.Duration
	// LaunchTTL is how long after creation a NodeClaim may stay unlaunched (launch keeps failing
	// with a retryable error) before it is deleted. Zero means DefaultLaunchTTL.
	LaunchTTL time.Duration
	// MaxConcurrentReconciles bounds parallel reconciles. Zero means defaults.MaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// InstanceNotFoundGrace is how long after launch a NodeClaim that has not registered is spared
	// the check that its instance still exists. After it, the NodeClaim is deleted (and so
	// replaced) as soon as the provider's Get reports its instance not found, instead of waiting
	// for RegistrationTTL; the check repeats every InstanceNotFoundGrace while the NodeClaim stays
	// unregistered. Zero means DefaultInstanceNotFoundGrace.
	InstanceNotFoundGrace time.Duration
}

func (o Options) withDefaults() Options {
	o.RegistrationTTL = defaults.Positive(o.RegistrationTTL, DefaultRegistrationTTL)
	o.LaunchTTL = defaults.Positive(o.LaunchTTL, DefaultLaunchTTL)
	o.MaxConcurrentReconciles = defaults.Positive(o.MaxConcurrentReconciles, defaults.MaxConcurrentReconciles)
	o.InstanceNotFoundGrace = defaults.Positive(o.InstanceNotFoundGrace, DefaultInstanceNotFoundGrace)
	return o
}

// stage is one step of the lifecycle. It reads the cluster and the cloud, changes the in-memory
// NodeClaim (metadata and status) and leaves writing it to the Controller. A stage that deletes
// the NodeClaim marks the in-memory copy as deleting, which ends the pass.
type stage interface {
	Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error)
}

// Controller reconciles NodeClaims through the lifecycle stages, in order: finalizer, adoption,
// launch, registration, initialization, liveness. NodeClaims being deleted are left to the termination
// controller.
type Controller struct {
	kube     client.Client
	clock    clock.Clock
	opts     Options
	recorder events.EventRecorder
	metrics  *Metrics
	launch   *launch
	stages   []stage
}

// NewController returns a lifecycle controller. kube should be a manager's cached client (the
// Node index of package fieldindex must be registered; SetupWithManager does it), recorder a
// manager's GetEventRecorder(ControllerName), and reg the registry for its metrics (nil skips
// them). A nil clock means the real clock.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, clk clock.Clock, recorder events.EventRecorder, reg prometheus.Registerer, opts Options) (*Controller, error) {
	clk = defaults.Clock(clk)
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	l := &launch{kube: kube, cloud: cloud, clock: clk, recorder: recorder, metrics: m, cache: newLaunchCache()}
	return &Controller{
		kube:     kube,
		clock:    clk,
		opts:     opts,
		recorder: recorder,
		metrics:  m,
		launch:   l,
		stages: []stage{
			&finalizer{},
			adoption{},
			l,
			&registration{kube: kube, clock: clk, recorder: recorder, metrics: m},
			&initialization{kube: kube, clock: clk, metrics: m},
			&liveness{kube: kube, cloud: cloud, clock: clk, recorder: recorder, metrics: m, registrationTTL: opts.RegistrationTTL,
				launchTTL: opts.LaunchTTL, instanceGrace: opts.InstanceNotFoundGrace},
		},
	}, nil
}

// Reconcile runs the stages on one NodeClaim and writes its metadata, then its status, when
// they changed.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone: an instance launched for it and never recorded must not outlive it.
			return reconcile.Result{}, c.launch.abandon(ctx, req.Name, "")
		}
		return reconcile.Result{}, fmt.Errorf("get nodeclaim %s: %w", req.Name, err)
	}
	if nc.Status.ProviderID != "" {
		ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("providerID", nc.Status.ProviderID))
	}
	// An instance launched for an earlier NodeClaim of the same name belongs to nobody now.
	if err := c.launch.abandon(ctx, nc.Name, nc.UID); err != nil {
		return reconcile.Result{}, err
	}
	if !nc.DeletionTimestamp.IsZero() {
		return c.reconcileDeleting(ctx, nc)
	}
	stored := nc.DeepCopy()
	initConditions(nc, c.clock.Now())
	var (
		result reconcile.Result
		errs   []error
	)
	for _, s := range c.stages {
		r, err := s.Reconcile(ctx, nc)
		if err != nil {
			errs = append(errs, err)
		}
		result = earliest(result, r)
		if !nc.DeletionTimestamp.IsZero() {
			// The stage deleted the NodeClaim; termination takes it from here.
			return settle(ctx, reconcile.Result{}, errors.Join(errs...))
		}
	}
	setReady(nc, c.clock.Now())
	metadataWritten, err := c.write(ctx, stored, nc)
	if metadataWritten && adopted(stored, nc) {
		// The mark is stored: this is the one pass that adopted the NodeClaim.
		reportAdoption(ctx, c.recorder, c.metrics, nc)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted while we launched: terminate the instance nobody else knows about.
			errs = append(errs, c.launch.abandon(ctx, nc.Name, ""))
		} else {
			errs = append(errs, err)
		}
	}
	return settle(ctx, result, errors.Join(errs...))
}

// settle turns a pass's result and errors into what the controller returns: a write that lost a
// race with another writer is retried soon without being logged as an error, other errors go to
// the rate-limited retry, and otherwise the stages' requeue stands.
func settle(ctx context.Context, result reconcile.Result, err error) (reconcile.Result, error) {
	switch {
	case err == nil:
		return result, nil
	case apierrors.IsConflict(err):
		log.FromContext(ctx).V(1).Info("retrying after a conflicting write", "error", err.Error())
		return reconcile.Result{RequeueAfter: statusreconcile.ConflictRetry}, nil
	default:
		return reconcile.Result{}, err
	}
}

// reconcileDeleting handles a NodeClaim that is being deleted. Termination owns it, except that
// an instance created moments before the deletion and not yet written to status must not be
// forgotten: its provider ID is recorded so that termination terminates it. The launch stays
// remembered until the NodeClaim is gone, when abandon makes sure the instance is terminated.
func (c *Controller) reconcileDeleting(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	created, ok := c.launch.cache.get(nc)
	if !ok || nc.Status.ProviderID != "" {
		return reconcile.Result{}, nil
	}
	stored := nc.DeepCopy()
	nc.Status.ProviderID = created.Status.ProviderID
	if err := c.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, c.launch.abandon(ctx, nc.Name, "")
		}
		return reconcile.Result{}, fmt.Errorf("record provider id of deleting nodeclaim %s: %w", nc.Name, err)
	}
	return reconcile.Result{}, nil
}

// write patches the NodeClaim's metadata and then its status, each only when changed, and each
// guarded by the resource version so that concurrent writers are not overwritten. It reports
// whether it patched the metadata (even when the status patch then failed).
func (c *Controller) write(ctx context.Context, stored, nc *karpv1.NodeClaim) (bool, error) {
	status := nc.Status.DeepCopy()
	metadataWritten := false
	if !equality.Semantic.DeepEqual(stored.ObjectMeta, nc.ObjectMeta) {
		if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
			return false, fmt.Errorf("patch nodeclaim %s: %w", nc.Name, err)
		}
		metadataWritten = true
		// The patch response carries the stored status; compare against it from now on.
		stored = nc.DeepCopy()
		nc.Status = *status
	}
	if !equality.Semantic.DeepEqual(stored.Status, nc.Status) {
		if err := c.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
			return metadataWritten, fmt.Errorf("patch nodeclaim %s status: %w", nc.Name, err)
		}
	}
	return metadataWritten, nil
}

// SetupWithManager registers the provider-ID indexes and the controller with mgr. The controller
// watches NodeClaims and the Nodes that carry their provider IDs, woken only by Node changes it
// reads (not heartbeats: nodepredicates.OnChange).
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	return fieldindex.SetupNodeClaimController(mgr, ControllerName, c.kube, c.opts.MaxConcurrentReconciles, c, nodepredicates.OnChange())
}

// earliest combines two results: the sooner non-zero RequeueAfter wins.
func earliest(a, b reconcile.Result) reconcile.Result {
	switch {
	case a.RequeueAfter == 0:
		return b
	case b.RequeueAfter == 0 || a.RequeueAfter < b.RequeueAfter:
		return a
	default:
		return b
	}
}

// nodePoolOf returns the NodePool label of the NodeClaim, for metrics.
func nodePoolOf(nc *karpv1.NodeClaim) string {
	return nc.Labels[karpv1.NodePoolLabelKey]
}
