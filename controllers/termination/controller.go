package termination

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
	"github.com/joiner-dev/joiner/controllers/nodepredicates"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
)

// Controller names (logs, metrics, events).
const (
	// NodeClaimControllerName terminates deleted NodeClaims.
	NodeClaimControllerName = "nodeclaim.termination"
	// NodeControllerName terminates Nodes deleted directly.
	NodeControllerName = "node.termination"
)

// Condition and event reasons.
const (
	// ReasonDraining is the reason of Drained=False while pods remain.
	ReasonDraining = "Draining"
	// ReasonDrained is the reason of Drained=True.
	ReasonDrained = "Drained"
	// ReasonInstanceTerminating is the reason of InstanceTerminating=True.
	ReasonInstanceTerminating = "InstanceTerminating"
	// ReasonNodeDeleted is the event reason when a NodeClaim is deleted because its Node was.
	ReasonNodeDeleted = "NodeDeleted"
	// ReasonTerminated is the event reason when a NodeClaim's termination finished.
	ReasonTerminated = "Terminated"
)

// Default option values.
const (
	// DefaultPollInterval is how often a drain or an instance termination is checked again.
	DefaultPollInterval = 5 * time.Second
	// DefaultMaxConcurrentReconciles is how many NodeClaims (and Nodes) terminate in parallel.
	DefaultMaxConcurrentReconciles = 100
)

// Options tune termination. The zero value means the defaults above.
type Options struct {
	// PollInterval is how often a drain or an instance termination that is still in progress is
	// checked again. Zero means DefaultPollInterval.
	PollInterval time.Duration
	// MaxConcurrentReconciles bounds parallel terminations. Zero means DefaultMaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// VolumePollInterval is how often termination looks again at the VolumeAttachments it waits
	// on. Zero means DefaultVolumePollInterval.
	VolumePollInterval time.Duration
}

func (o Options) withDefaults() Options {
	o.PollInterval = defaults.Positive(o.PollInterval, DefaultPollInterval)
	o.MaxConcurrentReconciles = defaults.Positive(o.MaxConcurrentReconciles, DefaultMaxConcurrentReconciles)
	o.VolumePollInterval = defaults.Positive(o.VolumePollInterval, DefaultVolumePollInterval)
	return o
}

// Controller terminates NodeClaims that are being deleted: taint and drain their Node, wait until
// the drained pods' volumes are detached, terminate the instance and wait until it is gone,
// release the Node, then the NodeClaim. It also deletes the NodeClaim of a Node that is deleted
// directly, and (through its node reconciler) terminates Nodes that have no NodeClaim.
type Controller struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	clock    clock.Clock
	recorder events.EventRecorder
	drainer  *Drainer
	metrics  *Metrics
	opts     Options
}

// NewController returns a termination controller. kube should be a manager's cached client (the
// indexes of package fieldindex must be registered; SetupWithManager does it); pods an uncached
// reader (GetAPIReader()) used to list the pods of draining nodes; recorder a manager's
// GetEventRecorder(NodeClaimControllerName); reg the registry for its metrics (nil skips them).
// A nil clock means the real clock.
func NewController(kube client.Client, pods client.Reader, cloud cloudprovider.CloudProvider, clk clock.Clock, recorder events.EventRecorder, reg prometheus.Registerer, opts Options) (*Controller, error) {
	clk = defaults.Clock(clk)
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Controller{
		kube: kube, cloud: cloud, clock: clk, recorder: recorder, metrics: m, opts: opts.withDefaults(),
		drainer: NewDrainer(kube, pods, clk, recorder, m),
	}, nil
}

// Reconcile terminates a NodeClaim that is being deleted, or deletes a NodeClaim whose Node is.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("nodeclaim", nc.Name, "providerID", nc.Status.ProviderID))
	nodes, err := c.nodesOf(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	if nc.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, c.followNodeDeletion(ctx, nc, nodes)
	}
	if !controllerutil.ContainsFinalizer(nc, karpv1.TerminationFinalizer) {
		return reconcile.Result{}, nil
	}
	result, err := c.terminate(ctx, nc, nodes)
	if apierrors.IsConflict(err) {
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return result, err
}

// followNodeDeletion deletes the NodeClaim when one of its Nodes is being deleted with the
// termination finalizer, so that `kubectl delete node` takes the same path as deleting the
// NodeClaim.
func (c *Controller) followNodeDeletion(ctx context.Context, nc *karpv1.NodeClaim, nodes []corev1.Node) error {
	for i := range nodes {
		node := &nodes[i]
		if node.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) {
			continue
		}
		c.recorder.Eventf(nc, node, corev1.EventTypeNormal, ReasonNodeDeleted, "Delete", "Node %s is being deleted; deleting its NodeClaim", node.Name)
		log.FromContext(ctx).Info("node is being deleted, deleting its nodeclaim", "node", node.Name)
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete nodeclaim %s of deleted node %s: %w", nc.Name, node.Name, err)
		}
		return nil
	}
	return nil
}

// terminate runs one pass of the termination of a deleting NodeClaim.
func (c *Controller) terminate(ctx context.Context, nc *karpv1.NodeClaim, nodes []corev1.Node) (reconcile.Result, error) {
	deadline, err := c.deadline(ctx, nc)
	if err != nil {
		return reconcile.Result{}, err
	}
	stored := nc.DeepCopy()
	now := c.clock.Now()

	// 1. Taint and drain every Node of the NodeClaim.
	ctx = withDrainReason(ctx, nc)
	waiting, gone, err := c.drainNodes(ctx, nc, nodes, deadline)
	if err != nil {
		return reconcile.Result{}, errors.Join(err, c.writeStatus(ctx, stored, nc))
	}
	if len(waiting) > 0 {
		nc.SetCondition(now, karpv1.ConditionTypeDrained, metav1.ConditionFalse, ReasonDraining,
			fmt.Sprintf("waiting for %d pods to leave: %s", len(waiting), summarize(waiting, 5)))
		return reconcile.Result{RequeueAfter: c.opts.PollInterval}, c.writeStatus(ctx, stored, nc)
	}
	nc.SetCondition(now, karpv1.ConditionTypeDrained, metav1.ConditionTrue, ReasonDrained, "")

	// 2. Wait until the volumes of the drained pods are detached, so that their pods can attach
	// them elsewhere, unless the terminationGracePeriod ran out.
	wait, err := c.awaitVolumes(ctx, nc, nodes, gone, deadline)
	if err != nil {
		return reconcile.Result{}, errors.Join(err, c.writeStatus(ctx, stored, nc))
	}
	if wait {
		return reconcile.Result{RequeueAfter: c.opts.VolumePollInterval}, c.writeStatus(ctx, stored, nc)
	}

	// 3. Terminate the instance and wait until the provider no longer knows it.
	if nc.Status.ProviderID != "" {
		nc.SetCondition(now, karpv1.ConditionTypeInstanceTerminating, metav1.ConditionTrue, ReasonInstanceTerminating, "")
		if err := c.writeStatus(ctx, stored, nc); err != nil {
			return reconcile.Result{}, err
		}
		err := c.cloud.Delete(ctx, nc)
		if err == nil {
			return reconcile.Result{RequeueAfter: c.opts.PollInterval}, nil
		}
		if !cloudprovider.IsNodeClaimNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("terminate instance %s of nodeclaim %s: %w", nc.Status.ProviderID, nc.Name, err)
		}
	} else if err := c.writeStatus(ctx, stored, nc); err != nil {
		return reconcile.Result{}, err
	}

	// 4. Release the Nodes, then the NodeClaim.
	for i := range nodes {
		held := controllerutil.ContainsFinalizer(&nodes[i], karpv1.TerminationFinalizer)
		if err := releaseNode(ctx, c.kube, &nodes[i]); err != nil {
			return reconcile.Result{}, err
		}
		if held {
			c.metrics.nodeTerminated(&nodes[i], c.clock.Now())
		}
	}
	if err := removeFinalizer(ctx, c.kube, nc); err != nil {
		return reconcile.Result{}, fmt.Errorf("release nodeclaim %s: %w", nc.Name, err)
	}
	c.metrics.nodeClaimTerminated(nc, c.clock.Now())
	c.recorder.Eventf(nc, nil, corev1.EventTypeNormal, ReasonTerminated, "Terminate", "Drained, instance %s terminated", nc.Status.ProviderID)
	log.FromContext(ctx).Info("terminated nodeclaim")
	return reconcile.Result{}, nil
}

// drainNodes taints and makes one drain pass over each Node of the NodeClaim. It returns the pods
// that still hold the drain, and the Nodes skipped because nothing runs on them any more.
func (c *Controller) drainNodes(ctx context.Context, nc *karpv1.NodeClaim, nodes []corev1.Node, deadline *time.Time) (waiting, gone []string, err error) {
	for i := range nodes {
		node := &nodes[i]
		if err := taintForTermination(ctx, c.kube, node); err != nil {
			return nil, nil, err
		}
		if c.nothingToDrain(ctx, nc, node) {
			gone = append(gone, node.Name)
			continue
		}
		res, err := c.drainer.Drain(ctx, node, deadline)
		if err != nil {
			return nil, nil, err
		}
		waiting = append(waiting, res.Waiting...)
	}
	return waiting, gone, nil
}

// nothingToDrain reports whether the Node can be skipped: it is not Ready and its instance is
// already gone, so its pods are not running anywhere.
func (c *Controller) nothingToDrain(ctx context.Context, nc *karpv1.NodeClaim, node *corev1.Node) bool {
	if nodepredicates.NodeReady(node) || nc.Status.ProviderID == "" {
		return false
	}
	_, err := c.cloud.Get(ctx, nc.Status.ProviderID)
	return cloudprovider.IsNodeClaimNotFound(err)
}

// deadline returns the deadline stamped in the karpenter.sh/nodeclaim-termination-timestamp
// annotation, else when the NodeClaim's terminationGracePeriod ends, stamping it there the first
// time; nil without either.
func (c *Controller) deadline(ctx context.Context, nc *karpv1.NodeClaim) (*time.Time, error) {
	// A stamped deadline holds even without a terminationGracePeriod: node repair and instance
	// health stamp "now" on any NodeClaim they replace forcefully, as Karpenter honours it.
	if v, ok := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		t, err := time.Parse(time.RFC3339, v)
		if err == nil {
			return &t, nil
		}
		log.FromContext(ctx).Info("ignoring unparsable termination timestamp", "value", v)
	}
	if nc.Spec.TerminationGracePeriod == nil {
		return nil, nil
	}
	t := nc.DeletionTimestamp.Add(nc.Spec.TerminationGracePeriod.Duration)
	stored := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = t.UTC().Format(time.RFC3339)
	if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
		return nil, fmt.Errorf("stamp termination deadline on nodeclaim %s: %w", nc.Name, err)
	}
	return &t, nil
}

// writeStatus patches the NodeClaim's status when it changed, guarded by the resource version.
func (c *Controller) writeStatus(ctx context.Context, stored, nc *karpv1.NodeClaim) error {
	if equality.Semantic.DeepEqual(stored.Status, nc.Status) {
		return nil
	}
	err := c.kube.Status().Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("patch nodeclaim %s status: %w", nc.Name, err)
	}
	if err == nil {
		c.metrics.statusWritten(stored, nc)
	}
	*stored = *nc.DeepCopy()
	return nil
}

// nodesOf returns the Nodes of the NodeClaim: those with its provider ID, or else the one named in
// its status.
func (c *Controller) nodesOf(ctx context.Context, nc *karpv1.NodeClaim) ([]corev1.Node, error) {
	nodes, err := fieldindex.NodesForProviderID(ctx, c.kube, nc.Status.ProviderID)
	if err != nil || len(nodes) > 0 || nc.Status.NodeName == "" {
		return nodes, err
	}
	node := corev1.Node{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, &node); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return []corev1.Node{node}, nil
}

// SetupWithManager registers the provider-ID indexes, this controller (NodeClaims, and the Nodes
// with their provider IDs) and the node reconciler (Nodes, and the NodeClaims of their provider
// IDs) with mgr.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	// Node heartbeats change nothing termination reads (readiness, provider ID, deletion,
	// finalizers, taints), and every wait requeues itself: heartbeats wake neither controller.
	if err := fieldindex.SetupNodeClaimController(mgr, NodeClaimControllerName, c.kube, c.opts.MaxConcurrentReconciles, c, nodepredicates.OnChange()); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(NodeControllerName).
		For(&corev1.Node{}, builder.WithPredicates(nodepredicates.OnChange())).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(fieldindex.NodeRequestsForNodeClaim(c.kube)))
	return statusreconcile.Complete(b, NodeControllerName, c.opts.MaxConcurrentReconciles, &nodeReconciler{Controller: c})
}

// summarize lists up to n names, then how many more there are.
func summarize(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}
