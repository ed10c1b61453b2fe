package expiration

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
)

// ControllerName is the name of the expiration controller (logs, metrics, events).
const ControllerName = "nodeclaim.expiration"

// Condition and event reasons.
const (
	// ReasonExpired is the reason of the Expired=True condition, and of the Normal event on a
	// NodeClaim that expired (marked or deleted).
	ReasonExpired = "Expired"
	// ReasonInvalidAnnotation is the reason of the Warning event on a NodePool whose
	// joiner.dev/expiration or joiner.dev/expiration-grace annotation is invalid.
	ReasonInvalidAnnotation = "InvalidExpirationAnnotation"
)

// warnEvery is how often the same invalid annotation value on a NodePool is reported again.
const warnEvery = 15 * time.Minute

// Options tune the expiration controller. The zero value means the defaults.
type Options struct {
	// MaxConcurrentReconciles bounds parallel reconciles. Zero means
	// defaults.MaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// DefaultGrace is the grace period of graceful expiration when a NodePool does not set a
	// valid joiner.dev/expiration-grace. Zero means karpv1.DefaultExpirationGrace (24h).
	DefaultGrace time.Duration
}

func (o Options) withDefaults() Options {
	o.MaxConcurrentReconciles = defaults.Positive(o.MaxConcurrentReconciles, defaults.MaxConcurrentReconciles)
	o.DefaultGrace = defaults.Positive(o.DefaultGrace, karpv1.DefaultExpirationGrace)
	return o
}

// Controller deletes expired NodeClaims, or marks them Expired when their NodePool asks for
// graceful expiration.
type Controller struct {
	kube     client.Client
	clock    clock.Clock
	recorder events.EventRecorder
	metrics  *Metrics
	opts     Options
	status   *statusreconcile.Reconciler[*karpv1.NodeClaim]

	mu sync.Mutex
	// warned is when each invalid annotation value of a NodePool was last reported.
	warned map[warning]time.Time
}

// warning identifies a reported invalid annotation value.
type warning struct {
	nodePool   types.UID
	annotation string
	value      string
}

// NewController returns an expiration controller. kube should be a manager's cached client;
// recorder a manager's GetEventRecorder(ControllerName); reg the registry for its metrics (nil
// skips them). A nil clock means the real clock.
func NewController(kube client.Client, clk clock.Clock, recorder events.EventRecorder, reg prometheus.Registerer, opts Options) (*Controller, error) {
	clk = defaults.Clock(clk)
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("create %s metrics: %w", ControllerName, err)
	}
	c := &Controller{kube: kube, clock: clk, recorder: recorder, metrics: m, opts: opts.withDefaults(), warned: map[warning]time.Time{}}
	c.status = statusreconcile.NodeClaimsByPool(kube, c.decide)
	return c, nil
}

// Reconcile expires one NodeClaim if its time has come, and otherwise requeues it for the next
// instant of its schedule. NodeClaims being deleted are left as they are.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	return c.status.Reconcile(ctx, req)
}

// decide expires a NodeClaim that is not being deleted, marks it Expired, or clears the condition.
func (c *Controller) decide(ctx context.Context, nc *karpv1.NodeClaim, np *karpv1.NodePool) (statusreconcile.Outcome, error) {
	p, problems := policyOf(np, c.opts.DefaultGrace)
	for _, pr := range problems {
		c.warn(np, pr)
	}
	s, expires := scheduleOf(nc, p)
	if !expires {
		return c.markExpired(nc, s, false, reconcile.Result{}), nil
	}
	now := c.clock.Now()
	switch next, wait := s.at(now); next {
	case stepDelete:
		result, err := c.delete(ctx, nc, p)
		return statusreconcile.Outcome{Result: result}, err
	case stepMark:
		return c.markExpired(nc, s, true, reconcile.Result{RequeueAfter: wait}), nil
	default:
		return c.markExpired(nc, s, false, reconcile.Result{RequeueAfter: wait}), nil
	}
}

// markExpired sets (expired) or removes the NodeClaim's Expired condition in memory. The outcome
// logs the change, and records an Event for an expiry, once the change is stored.
func (c *Controller) markExpired(nc *karpv1.NodeClaim, s schedule, expired bool, result reconcile.Result) statusreconcile.Outcome {
	if !expired {
		meta.RemoveStatusCondition(&nc.Status.Conditions, karpv1.ConditionTypeExpired)
		return statusreconcile.Outcome{Result: result, Stored: func(ctx context.Context) {
			log.FromContext(ctx).V(1).Info("removed the expired condition", "nodeclaim", nc.Name)
		}}
	}
	nc.SetCondition(c.clock.Now(), karpv1.ConditionTypeExpired, metav1.ConditionTrue, ReasonExpired, fmt.Sprintf(
		"Expired at %s (expireAfter %s); to be replaced within the disruption budgets, or deleted at %s",
		s.deadline.UTC().Format(time.RFC3339), nc.Spec.ExpireAfter, s.hard.UTC().Format(time.RFC3339)))
	return statusreconcile.Outcome{Result: result, Stored: func(ctx context.Context) {
		log.FromContext(ctx).V(1).Info("marked nodeclaim expired", "nodeclaim", nc.Name, "expireAfter", nc.Spec.ExpireAfter.String(), "forcefulAt", s.hard)
		c.recorder.Eventf(nc, nil, corev1.EventTypeNormal, ReasonExpired, "Mark",
			"NodeClaim expired after %s; it will be replaced within the disruption budgets, or deleted at %s", nc.Spec.ExpireAfter, s.hard.UTC().Format(time.RFC3339))
	}}
}

// delete deletes the expired NodeClaim, then counts it and records why. The resourceVersion
// precondition makes a reconcile that read a stale cache (one that predates this controller's own
// deletion, say) fail instead of deleting, and counting, twice.
func (c *Controller) delete(ctx context.Context, nc *karpv1.NodeClaim, p policy) (reconcile.Result, error) {
	log.FromContext(ctx).V(1).Info("deleting expired nodeclaim", "nodeclaim", nc.Name,
		"nodepool", nc.Labels[karpv1.NodePoolLabelKey], "expireAfter", nc.Spec.ExpireAfter.String(), "graceful", p.graceful)
	err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID, ResourceVersion: &nc.ResourceVersion})
	switch {
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	case apierrors.IsConflict(err):
		log.FromContext(ctx).V(1).Info("retrying the deletion of a changed nodeclaim", "nodeclaim", nc.Name, "error", err.Error())
		return reconcile.Result{RequeueAfter: statusreconcile.ConflictRetry}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("delete expired nodeclaim %s: %w", nc.Name, err)
	}
	c.metrics.expired(nc)
	if p.graceful {
		c.recorder.Eventf(nc, nil, corev1.EventTypeNormal, ReasonExpired, "Delete",
			"NodeClaim expired after %s and was not replaced within the grace period of %s (%s); deleting it",
			nc.Spec.ExpireAfter, p.grace, karpv1.ExpirationGraceAnnotationKey)
	} else {
		c.recorder.Eventf(nc, nil, corev1.EventTypeNormal, ReasonExpired, "Delete", "NodeClaim expired after %s", nc.Spec.ExpireAfter)
	}
	return reconcile.Result{}, nil
}

// warn records a Warning event about the NodePool's invalid annotation, at most every warnEvery
// per value.
func (c *Controller) warn(np *karpv1.NodePool, pr problem) {
	key := warning{nodePool: np.UID, annotation: pr.annotation, value: pr.value}
	now := c.clock.Now()
	c.mu.Lock()
	last, seen := c.warned[key]
	due := !seen || now.Sub(last) >= warnEvery
	if due {
		for k, t := range c.warned {
			if now.Sub(t) >= warnEvery {
				delete(c.warned, k)
			}
		}
		c.warned[key] = now
	}
	c.mu.Unlock()
	if due {
		c.recorder.Eventf(np, nil, corev1.EventTypeWarning, ReasonInvalidAnnotation, "Expire", "%s", pr.message)
	}
}

// SetupWithManager registers the controller with mgr. It watches NodeClaims, and NodePools whose
// annotations change (or that come or go), which enqueue their NodeClaims.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	w := statusreconcile.PoolWatch{Name: ControllerName, MaxConcurrentReconciles: c.opts.MaxConcurrentReconciles,
		PoolChanged: predicate.AnnotationChangedPredicate{}}
	return w.SetupWithManager(mgr, c.kube, c)
}
