// Package podevents keeps NodeClaim.status.lastPodEventTime current: the last time a pod was
// bound to the NodeClaim's Node or left it (went terminal or started terminating).
// Consolidation waits consolidateAfter from that time (package consolidatable).
//
// It watches Pods and writes only that one status field, through a merge patch of the status
// subresource. DaemonSet pods do not count, pods on Nodes without a NodeClaim are ignored, and a
// write is skipped while the stored time is within the dedupe window of now, because pod events
// are frequent in a busy cluster.
package podevents

import (
	"context"
	"fmt"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/joiner-dev/joiner/controllers/fieldindex"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
)

// ControllerName is the name of the pod events controller (logs, metrics).
const ControllerName = "nodeclaim.podevents"

// Default option values.
const (
	// DefaultDedupeWindow is how recent a stored lastPodEventTime may be for a new pod event not
	// to be written (Karpenter's dedupeTimeout). It is shorter than consolidation's validation
	// period, so that a decision taken during the window is still invalidated.
	DefaultDedupeWindow = 10 * time.Second
)

// Options tune the pod events controller. The zero value means the defaults above.
type Options struct {
	// DedupeWindow: a pod event is not written while the stored lastPodEventTime is less than
	// this old. Zero means DefaultDedupeWindow; a negative value writes every event.
	DedupeWindow time.Duration
	// MaxConcurrentReconciles bounds parallel reconciles. Zero means
	// defaults.MaxConcurrentReconciles.
	MaxConcurrentReconciles int
}

func (o Options) withDefaults() Options {
	if o.DedupeWindow == 0 {
		o.DedupeWindow = DefaultDedupeWindow
	}
	o.MaxConcurrentReconciles = defaults.Positive(o.MaxConcurrentReconciles, defaults.MaxConcurrentReconciles)
	return o
}

// Controller records pod events on the NodeClaim of the pod's Node. Its reconcile requests name
// Nodes (not pods): the pod may be gone by the time the request is handled, and a burst of events
// on one Node collapses into one request.
type Controller struct {
	kube  client.Client
	clock clock.Clock
	opts  Options
}

// NewController returns a pod events controller. kube should be a manager's cached client (the
// NodeClaim provider-ID index of package fieldindex must be registered; SetupWithManager does
// it). A nil clock means the real clock.
func NewController(kube client.Client, clk clock.Clock, opts Options) *Controller {
	clk = defaults.Clock(clk)
	return &Controller{kube: kube, clock: clk, opts: opts.withDefaults()}
}

// Reconcile sets status.lastPodEventTime of the NodeClaim of the Node named by req to now, unless
// the stored time is within the dedupe window. Nodes that are gone, or that no NodeClaim (or more
// than one) carries the provider ID of, are left alone.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("get node %s: %w", req.Name, err)
	}
	ncs, err := fieldindex.NodeClaimsForProviderID(ctx, c.kube, node.Spec.ProviderID)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("find the nodeclaim of node %s: %w", node.Name, err)
	}
	switch len(ncs) {
	case 0:
		// Not a node Joiner manages.
		return reconcile.Result{}, nil
	case 1:
	default:
		// Ambiguous; the NodeClaim lifecycle reports duplicates, this controller does not guess.
		logger.V(1).Info("several nodeclaims carry the node's provider id, not recording the pod event",
			"providerID", node.Spec.ProviderID, "nodeclaims", len(ncs))
		return reconcile.Result{}, nil
	}
	nc := &ncs[0]
	now := c.clock.Now()
	if last := nc.Status.LastPodEventTime.Time; !last.IsZero() && now.Sub(last) < c.opts.DedupeWindow {
		return reconcile.Result{}, nil
	}
	stored := nc.DeepCopy()
	nc.Status.LastPodEventTime = metav1.NewTime(now)
	if err := c.kube.Status().Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("record the last pod event time of nodeclaim %s: %w", nc.Name, err)
	}
	logger.V(1).Info("recorded pod event", "nodeclaim", nc.Name, "lastPodEventTime", now)
	return reconcile.Result{}, nil
}

// SetupWithManager registers the provider-ID indexes and the controller with mgr. The controller
// watches Pods and enqueues the Node of each pod event that counts (see podEventHandler).
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	if err := fieldindex.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).Named(ControllerName).Watches(&corev1.Pod{}, podEventHandler())
	return statusreconcile.Complete(b, ControllerName, c.opts.MaxConcurrentReconciles, c)
}

// podEventHandler enqueues the Node of every pod event that counts:
//   - a pod created already bound, except the pods of the cache's initial list (replaying them as
//     bindings would restart every node's consolidation timer whenever the controller starts; the
//     price is that an event while the controller starts up is not recorded);
//   - a pod newly bound (spec.nodeName set), newly terminal (Succeeded or Failed) or newly
//     terminating (deletionTimestamp set);
//   - a bound pod deleted while the cache never saw it terminating or terminal. The API server
//     marks a bound pod terminating before removing it, even with a zero grace period, so this
//     only happens when the watch missed that update and the informer learns of the deletion
//     alone.
//
// DaemonSet pods never count: they come and go with the node, not with the workload.
func podEventHandler() handler.EventHandler {
	enqueue := func(q workqueue.TypedRateLimitingInterface[reconcile.Request], nodeName string) {
		if nodeName != "" {
			q.Add(reconcile.Request{NamespacedName: client.ObjectKey{Name: nodeName}})
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			pod, ok := e.Object.(*corev1.Pod)
			if !ok || e.IsInInitialList {
				return
			}
			enqueue(q, created(pod))
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			oldPod, okOld := e.ObjectOld.(*corev1.Pod)
			newPod, okNew := e.ObjectNew.(*corev1.Pod)
			if !okOld || !okNew {
				return
			}
			enqueue(q, updated(oldPod, newPod))
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			pod, ok := e.Object.(*corev1.Pod)
			if !ok {
				return
			}
			enqueue(q, deleted(pod))
		},
	}
}

// created returns the Node of a pod created bound to it, or "" when the creation is no pod event.
func created(pod *corev1.Pod) string {
	if pod.Spec.NodeName == "" || podpredicates.IsDaemonSetPod(pod) || podpredicates.IsTerminal(pod) {
		return ""
	}
	return pod.Spec.NodeName
}

// updated returns the Node of a pod that was just bound to it, went terminal or started
// terminating, or "" when the update is no pod event.
func updated(oldPod, newPod *corev1.Pod) string {
	if newPod.Spec.NodeName == "" || podpredicates.IsDaemonSetPod(newPod) {
		return ""
	}
	bound := oldPod.Spec.NodeName == ""
	terminal := !podpredicates.IsTerminal(oldPod) && podpredicates.IsTerminal(newPod)
	terminating := oldPod.DeletionTimestamp == nil && newPod.DeletionTimestamp != nil
	if bound || terminal || terminating {
		return newPod.Spec.NodeName
	}
	return ""
}

// deleted returns the Node of a bound pod whose deletion is the first sign of it leaving, or ""
// when the deletion is no pod event (the pod was never bound, or its terminal phase or
// terminating state was already seen).
func deleted(pod *corev1.Pod) string {
	if pod.Spec.NodeName == "" || podpredicates.IsDaemonSetPod(pod) || podpredicates.IsTerminal(pod) || pod.DeletionTimestamp != nil {
		return ""
	}
	return pod.Spec.NodeName
}
