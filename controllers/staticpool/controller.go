// Package staticpool keeps every static NodePool (spec.replicas set) at exactly spec.replicas
// NodeClaims: it creates plain template NodeClaims when there are fewer (never beyond
// spec.limits.nodes) and deletes the surplus when there are more, leaving the drain and the
// instance to the termination controller.
//
// It never touches dynamic NodePools or NodePools being deleted, never deletes a Node itself,
// and never deletes a NodeClaim that a disruption command has marked: such a NodeClaim counts
// as present for scale-up (disruption replaces it) and as already gone for scale-down.
package staticpool

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
	"github.com/joiner-dev/joiner/controllers/nodeclaimgate"
	"github.com/joiner-dev/joiner/controllers/nodepoolref"
	"github.com/joiner-dev/joiner/controllers/state"
)

// ControllerName is the name of the static NodePool controller (logs, events).
const ControllerName = "nodepool.static"

// Default option values.
const (
	// DefaultResyncPeriod is how often every static NodePool is looked at again without a
	// watched change.
	DefaultResyncPeriod = time.Minute
)

// Event reasons, on the NodePool.
const (
	// ReasonScaledUp is the event reason after NodeClaims were created: "Scaled static NodePool
	// from X to Y".
	ReasonScaledUp = "ScaledUp"
	// ReasonScaledDown is the event reason after surplus NodeClaims were deleted: "Scaled static
	// NodePool from X to Y".
	ReasonScaledDown = "ScaledDown"
	// ReasonNodeLimitReached is the Warning event reason when spec.limits.nodes stops a scale-up.
	ReasonNodeLimitReached = "NodeLimitReached"
	// ReasonFailedScaleUp is the Warning event reason when a NodeClaim could not be created.
	ReasonFailedScaleUp = "FailedScaleUp"
)

// Options tune the static NodePool controller. The zero value means the defaults.
type Options struct {
	// ResyncPeriod is how often a static NodePool is reconciled without a watched change. Zero
	// means DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// MaxConcurrentReconciles bounds parallel reconciles. Zero means
	// defaults.MaxConcurrentReconciles.
	MaxConcurrentReconciles int
}

func (o Options) withDefaults() Options {
	o.ResyncPeriod = defaults.Positive(o.ResyncPeriod, DefaultResyncPeriod)
	o.MaxConcurrentReconciles = defaults.Positive(o.MaxConcurrentReconciles, defaults.MaxConcurrentReconciles)
	return o
}

// Controller keeps static NodePools at spec.replicas NodeClaims.
type Controller struct {
	kube     client.Client
	clock    clock.Clock
	recorder events.EventRecorder
	metrics  *Metrics
	gate     *nodeclaimgate.Gate
	opts     Options
	expect   *expectations
}

// NewController returns a static NodePool controller. kube should be a manager's cached client
// (SetupWithManager adds the pod index scale-down reads); recorder a manager's
// GetEventRecorder(ControllerName); reg the registry for its metrics (nil skips them). A nil
// clock means the real clock.
func NewController(kube client.Client, clk clock.Clock, recorder events.EventRecorder, reg prometheus.Registerer, opts Options) (*Controller, error) {
	clk = defaults.Clock(clk)
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	// A static NodeClaim is for no pod: the gate never refuses it, but it is the one way
	// NodeClaims are created. It logs with each reconcile's logger.
	gate, err := nodeclaimgate.New(kube, recorder, logr.Logger{}, reg, ControllerName)
	if err != nil {
		return nil, fmt.Errorf("static NodePools: %w", err)
	}
	return &Controller{kube: kube, clock: clk, recorder: recorder, metrics: m, gate: gate, opts: opts.withDefaults(), expect: newExpectations()}, nil
}

// poolState is a static NodePool's NodeClaims as one reconcile counts them.
type poolState struct {
	// present counts the NodeClaims not being deleted, disruption candidates included, plus those
	// created but not in the cache yet. Scale-up tops it up to spec.replicas.
	present int64
	// deletable are the NodeClaims scale-down may delete: not being deleted, not marked by a
	// disruption command.
	deletable []*karpv1.NodeClaim
	// running is len(deletable) plus the NodeClaims created but not in the cache yet. Scale-down
	// brings it down to spec.replicas.
	running int64
	// total counts every NodeClaim of the NodePool, deleting ones included (their nodes still
	// exist), plus those not in the cache yet: what spec.limits.nodes caps.
	total int64
}

// Reconcile creates or deletes NodeClaims of one static NodePool until it has spec.replicas, and
// looks again after ResyncPeriod.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	np := &karpv1.NodePool{}
	if err := c.kube.Get(ctx, req.NamespacedName, np); err != nil {
		if apierrors.IsNotFound(err) {
			c.expect.forget(req.Name)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("get nodepool %s: %w", req.Name, err)
	}
	if !np.IsStatic() || !np.DeletionTimestamp.IsZero() {
		c.expect.forget(np.Name)
		return reconcile.Result{}, nil
	}
	var list karpv1.NodeClaimList
	if err := c.kube.List(ctx, &list, client.MatchingLabels{karpv1.NodePoolLabelKey: np.Name}); err != nil {
		return reconcile.Result{}, fmt.Errorf("list nodeclaims of nodepool %s: %w", np.Name, err)
	}
	s := c.count(np.Name, list.Items)
	replicas := *np.Spec.Replicas
	result := reconcile.Result{RequeueAfter: c.opts.ResyncPeriod}
	switch {
	case s.present < replicas:
		return result, c.scaleUp(ctx, np, s, replicas)
	case s.running > replicas:
		retry, err := c.scaleDown(ctx, np, s, replicas)
		if retry {
			result.RequeueAfter = statusreconcile.ConflictRetry
		}
		return result, err
	}
	return result, nil
}

// count sorts the NodePool's NodeClaims, corrected by the writes the cache has not shown yet.
func (c *Controller) count(pool string, ncs []karpv1.NodeClaim) poolState {
	unseen, pendingDelete := c.expect.reconcile(pool, ncs, c.clock.Now())
	s := poolState{present: int64(unseen), running: int64(unseen), total: int64(len(ncs) + unseen)}
	for i := range ncs {
		nc := &ncs[i]
		if !nc.DeletionTimestamp.IsZero() || pendingDelete[nc.Name] {
			continue
		}
		s.present++
		if nc.Annotations[karpv1.DisruptionCommandAnnotationKey] != "" {
			continue
		}
		s.deletable = append(s.deletable, nc)
		s.running++
	}
	return s
}

// scaleUp creates the NodeClaims the NodePool lacks, as far as spec.limits.nodes allows. A
// NodePool whose Ready condition is False (its node class is missing or not ready) waits.
func (c *Controller) scaleUp(ctx context.Context, np *karpv1.NodePool, s poolState, replicas int64) error {
	logger := log.FromContext(ctx).WithValues("nodepool", np.Name)
	if ready := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeReady); ready != nil && ready.Status == metav1.ConditionFalse {
		logger.V(1).Info("not scaling up a static nodepool that is not ready", "reason", ready.Reason, "replicas", replicas, "nodeClaims", s.present)
		return nil
	}
	want := replicas - s.present
	n := want
	if limit, ok := np.Spec.Limits[state.ResourceNodes]; ok {
		if room := max(limit.Value()-s.total, 0); room < n {
			n = room
			c.recorder.Eventf(np, nil, corev1.EventTypeWarning, ReasonNodeLimitReached, "Scale",
				"Cannot scale static NodePool from %d to %d replicas: limits.nodes is %s and %d NodeClaims (deleting ones included) count against it; creating %d",
				s.present, replicas, limit.String(), s.total, n)
			logger.Info("limits.nodes stops the scale-up of a static nodepool", "replicas", replicas, "nodeClaims", s.present, "limit", limit.String(), "creating", n)
		}
	}
	var created int64
	var err error
	for ; created < n; created++ {
		nc := NodeClaim(np)
		if err = c.gate.Create(ctx, nc, nil); err != nil {
			err = fmt.Errorf("create nodeclaim for static nodepool %s: %w", np.Name, err)
			c.recorder.Eventf(np, nil, corev1.EventTypeWarning, ReasonFailedScaleUp, "Scale", "Could not create a NodeClaim: %v", err)
			break
		}
		c.expect.expectCreated(np.Name, nc.Name, c.clock.Now())
		c.metrics.created(np.Name)
		logger.V(1).Info("created nodeclaim", "nodeclaim", nc.Name)
	}
	if created > 0 {
		c.recorder.Eventf(np, nil, corev1.EventTypeNormal, ReasonScaledUp, "Scale", "Scaled static NodePool from %d to %d", s.present, s.present+created)
		logger.Info("scaled up static nodepool", "from", s.present, "to", s.present+created, "replicas", replicas)
	}
	return err
}

// scaleDown deletes the surplus NodeClaims in scaleDownOrder; termination drains and terminates
// them. A NodeClaim that changed since the cache read it (a disruption command may just have
// marked it) is not deleted: retry asks for a quick look again.
func (c *Controller) scaleDown(ctx context.Context, np *karpv1.NodePool, s poolState, replicas int64) (retry bool, err error) {
	logger := log.FromContext(ctx).WithValues("nodepool", np.Name)
	cands, err := c.scaleDownCandidates(ctx, s.deletable)
	if err != nil {
		return false, err
	}
	surplus := min(s.running-replicas, int64(len(cands)))
	var (
		deleted int64
		errs    []error
	)
	for _, cand := range cands[:surplus] {
		nc := cand.nodeClaim
		uid, rv := nc.UID, nc.ResourceVersion
		err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		switch {
		case apierrors.IsNotFound(err):
			continue // gone already; the next look counts without it
		case apierrors.IsConflict(err):
			logger.V(1).Info("nodeclaim changed since it was read, looking again", "nodeclaim", nc.Name)
			retry = true
			continue
		case err != nil:
			errs = append(errs, fmt.Errorf("delete nodeclaim %s of static nodepool %s: %w", nc.Name, np.Name, err))
			continue
		}
		deleted++
		c.expect.expectDeleted(np.Name, nc.Name, c.clock.Now())
		c.metrics.deleted(nc)
		logger.V(1).Info("deleted surplus nodeclaim", "nodeclaim", nc.Name, "initialized", cand.initialized, "pods", cand.pods)
	}
	if deleted > 0 {
		c.recorder.Eventf(np, nil, corev1.EventTypeNormal, ReasonScaledDown, "Scale", "Scaled static NodePool from %d to %d", s.running, s.running-deleted)
		logger.Info("scaled down static nodepool", "from", s.running, "to", s.running-deleted, "replicas", replicas)
	}
	return retry, errors.Join(errs...)
}

// SetupWithManager registers the pod index scale-down reads and adds the controller to mgr. It
// watches NodePools (spec changes, Ready changes, creation) and the NodeClaims of every NodePool
// (creation, deletion, being marked or unmarked by disruption), which enqueue their NodePool.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	err := fieldindex.Index(context.Background(), mgr.GetFieldIndexer(), &corev1.Pod{}, "pods", podNodeNameField,
		func(p *corev1.Pod) string { return p.Spec.NodeName })
	if err != nil {
		return fmt.Errorf("set up %s controller: %w", ControllerName, err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&karpv1.NodePool{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, readyChanged()))).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(nodepoolref.NodePoolRequest), builder.WithPredicates(nodeClaimCountChanged()))
	return statusreconcile.Complete(b, ControllerName, c.opts.MaxConcurrentReconciles, c)
}

// readyChanged passes NodePool updates whose Ready condition changed status: a NodePool that
// becomes ready may scale up.
func readyChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			before, ok1 := e.ObjectOld.(*karpv1.NodePool)
			after, ok2 := e.ObjectNew.(*karpv1.NodePool)
			if !ok1 || !ok2 {
				return false
			}
			return readyStatus(before) != readyStatus(after)
		},
	}
}

func readyStatus(np *karpv1.NodePool) metav1.ConditionStatus {
	if c := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeReady); c != nil {
		return c.Status
	}
	return ""
}

// nodeClaimCountChanged passes the NodeClaim events that can change how a NodePool counts: a
// NodeClaim created or deleted, starting to be deleted, or marked or unmarked by disruption.
func nodeClaimCountChanged() predicate.Funcs {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			before, after := e.ObjectOld, e.ObjectNew
			return before.GetDeletionTimestamp().IsZero() != after.GetDeletionTimestamp().IsZero() ||
				before.GetAnnotations()[karpv1.DisruptionCommandAnnotationKey] != after.GetAnnotations()[karpv1.DisruptionCommandAnnotationKey]
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}
