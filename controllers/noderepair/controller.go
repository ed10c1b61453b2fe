package noderepair

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/defaults"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
	"github.com/joiner-dev/joiner/controllers/statusreconcile"
)

// ControllerName is the name of the node repair controller (logs, metrics, events).
const ControllerName = "node.health"

// Condition and event reasons.
const (
	// ReasonUnhealthy is the reason of the DisruptionReason=True condition node repair sets on the
	// NodeClaim it deletes, and of the Warning events on that NodeClaim and its Node.
	ReasonUnhealthy = "Unhealthy"
	// ReasonRepairBlocked is the reason of the Warning event on a Node whose repair waits because
	// too many nodes of its NodePool (or of the cluster) are unhealthy (Karpenter's).
	ReasonRepairBlocked = "NodeRepairBlocked"
)

// Timings (Karpenter v1.14's).
const (
	// BlockedRetry is how soon a repair the 20% rule blocked is tried again.
	BlockedRetry = 5 * time.Minute
	// blockedEventEvery is how often the NodeRepairBlocked event of one Node is repeated.
	blockedEventEvery = 15 * time.Minute
)

// Options tune node repair. The zero value means the defaults.
type Options struct {
	// MaxConcurrentReconciles bounds parallel reconciles. Zero means
	// defaults.MaxConcurrentReconciles.
	MaxConcurrentReconciles int
	// Toleration, when positive, replaces the toleration of every policy of the provider, so that
	// tests and demonstrations need not wait 30 minutes. Zero keeps the provider's tolerations.
	// It is not a user setting.
	Toleration time.Duration
}

// Controller repairs Nodes: it deletes the NodeClaim of a Node whose condition has matched one of
// the provider's repair policies for longer than the policy tolerates, unless too many nodes are
// unhealthy at once.
type Controller struct {
	kube     client.Client
	clock    clock.Clock
	recorder events.EventRecorder
	metrics  *Metrics
	policies []cloudprovider.RepairPolicy
	opts     Options

	mu sync.Mutex
	// blockedSent is when the NodeRepairBlocked event of each Node was last recorded.
	blockedSent map[types.UID]time.Time
}

// NewController returns a node repair controller for the provider's RepairPolicies. kube should
// be a manager's cached client (SetupWithManager registers the provider-ID index it reads);
// recorder a manager's GetEventRecorder(ControllerName); reg the registry for its metrics (nil
// skips them). A nil clock means the real clock. A provider without policies, or with an invalid
// one, is an error: register the controller only for a provider that repairs.
func NewController(kube client.Client, cloud cloudprovider.CloudProvider, clk clock.Clock, recorder events.EventRecorder, reg prometheus.Registerer, opts Options) (*Controller, error) {
	if cloud == nil {
		return nil, errors.New("create node repair: a cloud provider is required")
	}
	policies := cloud.RepairPolicies()
	if len(policies) == 0 {
		return nil, fmt.Errorf("create node repair: cloud provider %s has no repair policies", cloud.Name())
	}
	if err := validate(policies); err != nil {
		return nil, fmt.Errorf("create node repair: cloud provider %s: %w", cloud.Name(), err)
	}
	if opts.Toleration < 0 {
		return nil, fmt.Errorf("create node repair: toleration %s is negative", opts.Toleration)
	}
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("create %s metrics: %w", ControllerName, err)
	}
	opts.MaxConcurrentReconciles = defaults.Positive(opts.MaxConcurrentReconciles, defaults.MaxConcurrentReconciles)
	return &Controller{
		kube: kube, clock: defaults.Clock(clk), recorder: recorder, metrics: m, opts: opts,
		policies: withToleration(policies, opts.Toleration), blockedSent: map[types.UID]time.Time{},
	}, nil
}

// Reconcile repairs one Node if it is due, and otherwise asks to look again when its toleration
// ends (or, when the 20% rule blocks it, after BlockedRetry).
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	node := &corev1.Node{}
	if err := c.kube.Get(ctx, req.NamespacedName, node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !node.DeletionTimestamp.IsZero() {
		return reconcile.Result{}, nil
	}
	m, ok := firstMatch(node, c.policies)
	if !ok {
		return reconcile.Result{}, nil
	}
	nc, err := c.nodeClaimOf(ctx, node)
	if err != nil || nc == nil {
		return reconcile.Result{}, err
	}
	ctx = log.IntoContext(ctx, log.FromContext(ctx).WithValues("node", node.Name, "nodeclaim", nc.Name))
	now := c.clock.Now()
	if now.Before(m.deadline) {
		return reconcile.Result{RequeueAfter: m.deadline.Sub(now)}, nil
	}
	pool := nc.Labels[karpv1.NodePoolLabelKey]
	sick, total, err := c.count(ctx, pool)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !repairAllowed(sick, total) {
		c.blocked(ctx, node, pool, sick, total)
		return reconcile.Result{RequeueAfter: BlockedRetry}, nil
	}
	return c.repair(ctx, node, nc, m)
}

// nodeClaimOf returns the NodeClaim that owns the Node (by provider ID), or nil when none does or
// it is being deleted: repair leaves those alone.
func (c *Controller) nodeClaimOf(ctx context.Context, node *corev1.Node) (*karpv1.NodeClaim, error) {
	claims, err := fieldindex.NodeClaimsForProviderID(ctx, c.kube, node.Spec.ProviderID)
	if err != nil {
		return nil, fmt.Errorf("find the nodeclaim of node %s: %w", node.Name, err)
	}
	for i := range claims {
		if claims[i].DeletionTimestamp.IsZero() {
			return &claims[i], nil
		}
	}
	return nil, nil
}

// count returns how many Nodes of the NodePool (every Node of the cluster when pool is "") are
// unhealthy, and how many there are.
func (c *Controller) count(ctx context.Context, pool string) (sick, total int, err error) {
	var nodes corev1.NodeList
	var opts []client.ListOption
	if pool != "" {
		opts = append(opts, client.MatchingLabels{karpv1.NodePoolLabelKey: pool})
	}
	if err := c.kube.List(ctx, &nodes, opts...); err != nil {
		return 0, 0, fmt.Errorf("list the nodes of nodepool %q: %w", pool, err)
	}
	for i := range nodes.Items {
		if unhealthy(&nodes.Items[i], c.policies) {
			sick++
		}
	}
	return sick, len(nodes.Items), nil
}

// blocked records (at most every blockedEventEvery per Node) that the 20% rule holds the repair.
func (c *Controller) blocked(ctx context.Context, node *corev1.Node, pool string, sick, total int) {
	scope := "nodepool"
	if pool == "" {
		scope = "cluster"
	}
	log.FromContext(ctx).Info("node repair blocked: too many unhealthy nodes", "nodepool", pool, "unhealthy", sick, "nodes", total, "allowed", maxUnhealthy(total))
	if !c.dueBlockedEvent(node.UID) {
		return
	}
	c.recorder.Eventf(node, nil, corev1.EventTypeWarning, ReasonRepairBlocked, "Repair",
		"more than %d%% nodes are unhealthy in the %s (%d of %d; at most %d may be repaired at once)", maxUnhealthyPercent, scope, sick, total, maxUnhealthy(total))
}

// dueBlockedEvent reports whether the Node's NodeRepairBlocked event may be recorded now, and
// notes it if so.
func (c *Controller) dueBlockedEvent(uid types.UID) bool {
	now := c.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if last, ok := c.blockedSent[uid]; ok && now.Sub(last) < blockedEventEvery {
		return false
	}
	for k, t := range c.blockedSent {
		if now.Sub(t) >= blockedEventEvery {
			delete(c.blockedSent, k)
		}
	}
	c.blockedSent[uid] = now
	return true
}

// repair marks the NodeClaim DisruptionReason=Unhealthy, stamps its termination deadline to now
// (karpenter.sh/nodeclaim-termination-timestamp: its terminationGracePeriod is over, so nothing
// waits on its pods) and deletes it, ignoring disruption budgets and do-not-disrupt. Each write
// is guarded by the resource version read, so a stale cache never repairs (or counts) twice.
func (c *Controller) repair(ctx context.Context, node *corev1.Node, nc *karpv1.NodeClaim, m match) (reconcile.Result, error) {
	now := c.clock.Now()
	why := fmt.Sprintf("node %s has %s", node.Name, m)
	stored := nc.DeepCopy()
	if nc.SetCondition(now, karpv1.ConditionTypeDisruptionReason, metav1.ConditionTrue, ReasonUnhealthy, why) {
		if retry, ok, err := statusreconcile.PatchStatus(ctx, c.kube, "nodeclaim", stored, nc); !ok {
			return retry, err
		}
	}
	stored = nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = now.UTC().Format(time.RFC3339)
	if retry, ok, err := statusreconcile.PatchObject(ctx, c.kube, "nodeclaim", stored, nc); !ok {
		return retry, err
	}
	err := c.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID, ResourceVersion: &nc.ResourceVersion})
	switch {
	case apierrors.IsNotFound(err):
		return reconcile.Result{}, nil
	case apierrors.IsConflict(err):
		return reconcile.Result{RequeueAfter: statusreconcile.ConflictRetry}, nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("delete unhealthy nodeclaim %s: %w", nc.Name, err)
	}
	c.metrics.repaired(nc, m)
	log.FromContext(ctx).Info("repairing unhealthy node: deleted its nodeclaim", "condition", string(m.policy.ConditionType),
		"status", string(m.policy.ConditionStatus), "since", m.since, "toleration", m.policy.TolerationDuration.String(),
		"nodepool", nc.Labels[karpv1.NodePoolLabelKey])
	note := fmt.Sprintf("Repairing: %s; deleting NodeClaim %s (disruption budgets and do-not-disrupt do not apply)", why, nc.Name)
	c.recorder.Eventf(node, nil, corev1.EventTypeWarning, ReasonUnhealthy, "Repair", "%s", note)
	c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, ReasonUnhealthy, "Repair", "%s", note)
	return reconcile.Result{}, nil
}

// SetupWithManager registers the provider-ID indexes and the controller with mgr. It reconciles a
// Node when it appears and when its conditions change (a type, status or lastTransitionTime).
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	if err := fieldindex.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("set up %s controller: %w", ControllerName, err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Node{}, builder.WithPredicates(conditionsChanged()))
	return statusreconcile.Complete(b, ControllerName, c.opts.MaxConcurrentReconciles, c)
}

// conditionsChanged passes Node creations and the updates that change a condition's type, status
// or lastTransitionTime (heartbeats, which change only lastHeartbeatTime, do not pass).
func conditionsChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return true },
		UpdateFunc: func(e event.UpdateEvent) bool {
			oldNode, ok1 := e.ObjectOld.(*corev1.Node)
			newNode, ok2 := e.ObjectNew.(*corev1.Node)
			return !ok1 || !ok2 || conditionKey(oldNode) != conditionKey(newNode)
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// conditionKey is the Node's conditions' types, statuses and transition times, in order.
func conditionKey(node *corev1.Node) string {
	key := ""
	for _, c := range node.Status.Conditions {
		key += fmt.Sprintf("%s=%s@%d;", c.Type, c.Status, c.LastTransitionTime.Unix())
	}
	return key
}
