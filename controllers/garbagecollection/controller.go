// Package garbagecollection reconciles the cloud with the cluster: once at start (so that a
// restarted Joiner cleans up after its predecessor at once) and then on a timer, it terminates
// instances that no NodeClaim accounts for (after a grace period, so launches in flight are
// safe), and deletes Launched NodeClaims whose instance is gone. A pass that had to spare
// something only for its grace period comes back as soon as that grace period ends rather than a
// whole interval later. It never deletes a Node that still has pods without a drain: an orphaned
// instance that has a Node is handed to termination by deleting that Node, and a NodeClaim is
// only deleted, which termination then finishes.
package garbagecollection

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
)

// ControllerName is the name of the garbage collector (logs, events).
const ControllerName = "nodeclaim.garbagecollection"

// Default option values.
const (
	// DefaultInterval is how often garbage collection runs.
	DefaultInterval = 2 * time.Minute
	// DefaultGracePeriod is how old an instance without a NodeClaim (or a NodeClaim's launch) must
	// be before garbage collection acts on it.
	DefaultGracePeriod = 30 * time.Second
	// minWait is the shortest wait between two passes, so that a pass coming back for a grace
	// period that ends (or a clock that disagrees) cannot spin.
	minWait = time.Second
)

// Event reasons.
const (
	// ReasonInstanceNotFound is the event reason on a NodeClaim deleted because its instance is gone.
	ReasonInstanceNotFound = "InstanceNotFound"
	// ReasonOrphanedInstance is the event reason on a Node deleted because its instance has no
	// NodeClaim.
	ReasonOrphanedInstance = "OrphanedInstance"
)

// Options tune garbage collection. The zero value means the defaults above.
type Options struct {
	// Interval between runs; the first runs at start. A run that spared an instance or a NodeClaim
	// only because of GracePeriod is followed by another when that grace period ends, if that is
	// sooner. Zero means DefaultInterval.
	Interval time.Duration
	// GracePeriod protects young instances and fresh launches: an instance without a NodeClaim is
	// terminated, and a NodeClaim without an instance deleted, only once the instance was created
	// (or first seen) or the NodeClaim launched at least this long ago. Zero means
	// DefaultGracePeriod.
	GracePeriod time.Duration
}

func (o Options) withDefaults() Options {
	o.Interval = defaults.Positive(o.Interval, DefaultInterval)
	o.GracePeriod = defaults.Positive(o.GracePeriod, DefaultGracePeriod)
	return o
}

// Controller is the garbage collector. It is a manager Runnable that runs on the leader only.
type Controller struct {
	kube     client.Client
	live     client.Reader
	cloud    cloudprovider.CloudProvider
	clock    clock.Clock
	recorder events.EventRecorder
	metrics  *Metrics
	opts     Options

	mu        sync.Mutex
	firstSeen map[string]time.Time
	// due is when the earliest grace period that spared something in the current pass ends
	// (zero: none did).
	due time.Time
}

// NewController returns a garbage collector. kube should be a manager's cached client (with the
// indexes of package fieldindex; SetupWithManager registers them); live an uncached reader
// (GetAPIReader()) used to double-check an instance is really orphaned before terminating it;
// recorder a manager's GetEventRecorder(ControllerName); reg the registry for its metrics (nil
// skips them). A nil clock means the real clock.
func NewController(kube client.Client, live client.Reader, cloud cloudprovider.CloudProvider, clk clock.Clock, recorder events.EventRecorder, reg prometheus.Registerer, opts Options) (*Controller, error) {
	clk = defaults.Clock(clk)
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return &Controller{kube: kube, live: live, cloud: cloud, clock: clk, recorder: recorder, metrics: m,
		opts: opts.withDefaults(), firstSeen: map[string]time.Time{}}, nil
}

// SetupWithManager registers the provider-ID indexes and adds the collector to mgr.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	if err := fieldindex.Register(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("add %s: %w", ControllerName, err)
	}
	return nil
}

// NeedLeaderElection makes garbage collection run on the leader only.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start runs garbage collection at once, then every Interval (sooner when a grace period that
// spared something ends first) until ctx ends. A failed run is logged and the next one tries
// again.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName(ControllerName)
	ctx = log.IntoContext(ctx, logger)
	for {
		if err := c.RunOnce(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "garbage collection failed")
		}
		wait := c.nextWait()
		logger.V(1).Info("next garbage collection", "in", wait.String())
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(wait):
		}
	}
}

// nextWait is how long to wait after a pass: Interval, or less when a grace period that spared
// something in the pass ends sooner, but never less than minWait.
func (c *Controller) nextWait() time.Duration {
	c.mu.Lock()
	due := c.due
	c.mu.Unlock()
	wait := c.opts.Interval
	if !due.IsZero() {
		wait = min(wait, max(due.Sub(c.clock.Now()), minWait))
	}
	return wait
}

// spared notes that something was left alone only until its grace period ends at end.
func (c *Controller) spared(end time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.due.IsZero() || end.Before(c.due) {
		c.due = end
	}
}

// RunOnce makes one garbage collection pass.
func (c *Controller) RunOnce(ctx context.Context) error {
	c.mu.Lock()
	c.due = time.Time{}
	c.mu.Unlock()
	instances, err := c.cloud.List(ctx)
	if err != nil {
		return fmt.Errorf("garbage collection: list instances: %w", err)
	}
	var ncs karpv1.NodeClaimList
	if err := c.kube.List(ctx, &ncs); err != nil {
		return fmt.Errorf("garbage collection: list nodeclaims: %w", err)
	}
	claimed := sets.New[string]()
	for i := range ncs.Items {
		claimed.Insert(ncs.Items[i].Status.ProviderID)
	}
	listed := sets.New[string]()
	for _, inst := range instances {
		listed.Insert(inst.Status.ProviderID)
	}
	c.forgetExcept(listed.Difference(claimed))
	return errors.Join(c.collectInstances(ctx, instances, claimed), c.collectNodeClaims(ctx, ncs.Items, listed))
}

// collectInstances terminates instances that no NodeClaim names, once past the grace period.
func (c *Controller) collectInstances(ctx context.Context, instances []*karpv1.NodeClaim, claimed sets.Set[string]) error {
	var (
		errs []error
		live sets.Set[string]
	)
	for _, inst := range instances {
		id := inst.Status.ProviderID
		if id == "" || claimed.Has(id) {
			continue
		}
		if age := c.age(inst); age < c.opts.GracePeriod {
			c.spared(c.clock.Now().Add(c.opts.GracePeriod - age))
			continue
		}
		if live == nil {
			// The cache may lag behind a NodeClaim whose status was just written: ask the API server.
			var err error
			if live, err = c.liveProviderIDs(ctx); err != nil {
				return err
			}
		}
		if live.Has(id) {
			continue
		}
		errs = append(errs, c.terminateOrphan(ctx, inst))
	}
	return errors.Join(errs...)
}

// terminateOrphan terminates an instance without a NodeClaim. When it has a Node, the Node is
// deleted (with the termination finalizer) instead, so that termination drains it first and then
// terminates the instance.
func (c *Controller) terminateOrphan(ctx context.Context, inst *karpv1.NodeClaim) error {
	id := inst.Status.ProviderID
	logger := log.FromContext(ctx).WithValues("providerID", id)
	nodes, err := c.nodesFor(ctx, id)
	if err != nil {
		return err
	}
	if len(nodes) > 0 {
		for i := range nodes {
			node := &nodes[i]
			if !node.DeletionTimestamp.IsZero() {
				continue
			}
			if !controllerutil.ContainsFinalizer(node, karpv1.TerminationFinalizer) {
				stored := node.DeepCopy()
				controllerutil.AddFinalizer(node, karpv1.TerminationFinalizer)
				if err := c.kube.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
					return fmt.Errorf("add termination finalizer to node %s of orphaned instance %s: %w", node.Name, id, err)
				}
			}
			c.recorder.Eventf(node, nil, corev1.EventTypeWarning, ReasonOrphanedInstance, "Delete",
				"Instance %s has no NodeClaim; deleting the Node so it is drained and the instance terminated", id)
			if err := c.kube.Delete(ctx, node); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete node %s of orphaned instance %s: %w", node.Name, id, err)
			}
			logger.Info("instance has no nodeclaim, deleting its node for termination", "node", node.Name)
			c.metrics.InstancesTerminated.Inc()
		}
		return nil
	}
	if err := c.cloud.Delete(ctx, inst); cloudprovider.IgnoreNodeClaimNotFound(err) != nil {
		return fmt.Errorf("terminate orphaned instance %s: %w", id, err)
	}
	logger.Info("terminated instance that has no nodeclaim")
	c.metrics.InstancesTerminated.Inc()
	c.forget(id)
	return nil
}

// collectNodeClaims deletes Launched NodeClaims whose instance the provider no longer has.
func (c *Controller) collectNodeClaims(ctx context.Context, ncs []karpv1.NodeClaim, listed sets.Set[string]) error {
	var errs []error
	for i := range ncs {
		nc := &ncs[i]
		id := nc.Status.ProviderID
		if id == "" || listed.Has(id) || !nc.DeletionTimestamp.IsZero() {
			continue
		}
		launched := nc.StatusCondition(karpv1.ConditionTypeLaunched)
		if launched == nil || launched.Status != metav1.ConditionTrue {
			continue
		}
		if end := launched.LastTransitionTime.Add(c.opts.GracePeriod); c.clock.Now().Before(end) {
			c.spared(end)
			continue
		}
		// List may be eventually consistent; Get is the word on this one instance.
		if _, err := c.cloud.Get(ctx, id); !cloudprovider.IsNodeClaimNotFound(err) {
			if err != nil {
				errs = append(errs, fmt.Errorf("get instance %s of nodeclaim %s: %w", id, nc.Name, err))
			}
			continue
		}
		c.recorder.Eventf(nc, nil, corev1.EventTypeWarning, ReasonInstanceNotFound, "Delete", "Instance %s no longer exists; deleting the NodeClaim", id)
		if err := c.kube.Delete(ctx, nc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete nodeclaim %s whose instance %s is gone: %w", nc.Name, id, err))
			continue
		}
		log.FromContext(ctx).Info("deleted nodeclaim whose instance is gone", "nodeclaim", nc.Name, "providerID", id)
		c.metrics.nodeClaimDeleted(nc)
	}
	return errors.Join(errs...)
}

// nodesFor returns the Nodes with the provider ID. When the cache knows none it asks the API
// server, so that a Node that joined moments ago is still drained rather than losing its
// instance underneath it.
func (c *Controller) nodesFor(ctx context.Context, providerID string) ([]corev1.Node, error) {
	nodes, err := fieldindex.NodesForProviderID(ctx, c.kube, providerID)
	if err != nil || len(nodes) > 0 {
		return nodes, err
	}
	var all corev1.NodeList
	if err := c.live.List(ctx, &all); err != nil {
		return nil, fmt.Errorf("list nodes from the api server: %w", err)
	}
	for i := range all.Items {
		if all.Items[i].Spec.ProviderID == providerID {
			nodes = append(nodes, all.Items[i])
		}
	}
	return nodes, nil
}

// liveProviderIDs lists the provider IDs of all NodeClaims straight from the API server.
func (c *Controller) liveProviderIDs(ctx context.Context) (sets.Set[string], error) {
	var ncs karpv1.NodeClaimList
	if err := c.live.List(ctx, &ncs); err != nil {
		return nil, fmt.Errorf("garbage collection: list nodeclaims from the api server: %w", err)
	}
	ids := sets.New[string]()
	for i := range ncs.Items {
		ids.Insert(ncs.Items[i].Status.ProviderID)
	}
	return ids, nil
}

// age is how long ago the instance was created, or, when the provider does not say, first seen
// without a NodeClaim.
func (c *Controller) age(inst *karpv1.NodeClaim) time.Duration {
	if !inst.CreationTimestamp.IsZero() {
		return c.clock.Since(inst.CreationTimestamp.Time)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	first, ok := c.firstSeen[inst.Status.ProviderID]
	if !ok {
		first = c.clock.Now()
		c.firstSeen[inst.Status.ProviderID] = first
	}
	return c.clock.Since(first)
}

func (c *Controller) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.firstSeen, id)
}

// forgetExcept drops first-seen times of instances that are no longer orphans.
func (c *Controller) forgetExcept(orphans sets.Set[string]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.firstSeen {
		if !orphans.Has(id) {
			delete(c.firstSeen, id)
		}
	}
}
