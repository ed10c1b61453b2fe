package nodeclaim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// Condition reasons and event reasons of the launch stage.
const (
	// ReasonLaunched is the reason of Launched=True.
	ReasonLaunched = "Launched"
	// ReasonLaunchFailed is the reason of Launched=False after an error that is retried.
	ReasonLaunchFailed = "LaunchFailed"
	// ReasonInsufficientCapacity is the event reason when no offering had capacity; the NodeClaim
	// is deleted so that the provisioner retries with other options.
	ReasonInsufficientCapacity = "InsufficientCapacityError"
	// ReasonNodeClassNotReady is the event reason when the node class cannot be used yet; the
	// NodeClaim is deleted.
	ReasonNodeClassNotReady = "NodeClassNotReady"
)

// launch creates the NodeClaim's instance through the cloud provider and copies what the
// provider resolved (provider ID, image, capacity, allocatable, labels) onto the NodeClaim.
type launch struct {
	kube     client.Client
	cloud    cloudprovider.CloudProvider
	clock    clock.Clock
	recorder events.EventRecorder
	metrics  *Metrics
	cache    *launchCache
}

// Reconcile launches the NodeClaim unless it is Launched already. A NodeClaim whose status names
// an instance but is not Launched (written so by another controller) is marked Launched rather
// than given a second instance. The NodeClaims it launches are marked OriginLaunched.
func (l *launch) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if isTrue(nc, karpv1.ConditionTypeLaunched) {
		// The launch is on record; nothing more to remember.
		l.cache.forget(nc)
		return reconcile.Result{}, nil
	}
	if _, ok := l.cache.get(nc); !ok && nc.Status.ProviderID != "" {
		nc.SetCondition(l.clock.Now(), karpv1.ConditionTypeLaunched, metav1.ConditionTrue, ReasonLaunched,
			"status.providerID was set before Joiner launched it")
		return reconcile.Result{}, nil
	}
	// A launch whose result could not be written yet is reused rather than repeated, so that a
	// failed status write does not create a second instance.
	created, ok := l.cache.get(nc)
	if !ok {
		out, err := l.cloud.Create(ctx, nc)
		if err != nil {
			return l.failed(ctx, nc, err)
		}
		created = out
		l.cache.put(nc, created)
		log.FromContext(ctx).Info("launched nodeclaim", "providerID", created.Status.ProviderID,
			"instanceType", created.Labels[karpv1.LabelInstanceType], "zone", created.Labels[karpv1.LabelTopologyZone],
			"capacityType", created.Labels[karpv1.CapacityTypeLabelKey])
	}
	nc.Labels = merged(nc.Labels, created.Labels)
	nc.Annotations = merged(nc.Annotations, created.Annotations)
	nc.Annotations = merged(nc.Annotations, map[string]string{OriginAnnotationKey: OriginLaunched})
	nc.Status.ProviderID = created.Status.ProviderID
	nc.Status.ImageID = created.Status.ImageID
	nc.Status.Capacity = created.Status.Capacity.DeepCopy()
	nc.Status.Allocatable = created.Status.Allocatable.DeepCopy()
	nc.SetCondition(l.clock.Now(), karpv1.ConditionTypeLaunched, metav1.ConditionTrue, ReasonLaunched, "")
	return reconcile.Result{}, nil
}

// failed handles a failed Create. Insufficient capacity and a node class that is not ready
// delete the NodeClaim (the provisioner will choose again); other errors are recorded in the
// Launched condition and retried with the controller's backoff.
func (l *launch) failed(ctx context.Context, nc *karpv1.NodeClaim, err error) (reconcile.Result, error) {
	var reason string
	switch {
	case cloudprovider.IsInsufficientCapacity(err):
		reason = ReasonInsufficientCapacity
	case cloudprovider.IsNodeClassNotReady(err):
		reason = ReasonNodeClassNotReady
	}
	if reason != "" {
		l.recorder.Eventf(nc, nil, corev1.EventTypeWarning, reason, "Launch", "Deleting NodeClaim: %s", err.Error())
		log.FromContext(ctx).Info("launch failed, deleting nodeclaim", "reason", reason, "error", err.Error())
		derr := l.kube.Delete(ctx, nc)
		if client.IgnoreNotFound(derr) != nil {
			return reconcile.Result{}, fmt.Errorf("delete nodeclaim %s after %s: %w", nc.Name, reason, derr)
		}
		if derr == nil {
			l.metrics.disrupted(nc, disruptionReason(reason))
		}
		now := metav1.NewTime(l.clock.Now())
		nc.DeletionTimestamp = &now
		return reconcile.Result{}, nil
	}
	reason, message := ReasonLaunchFailed, err.Error()
	var ce *cloudprovider.CreateError
	if errors.As(err, &ce) {
		if ce.Reason != "" {
			reason = ce.Reason
		}
		if ce.Message != "" {
			message = ce.Message
		}
	}
	l.recorder.Eventf(nc, nil, corev1.EventTypeWarning, reason, "Launch", "Launching NodeClaim failed: %s", message)
	nc.SetCondition(l.clock.Now(), karpv1.ConditionTypeLaunched, metav1.ConditionFalse, reason, message)
	return reconcile.Result{}, fmt.Errorf("launch nodeclaim %s: %w", nc.Name, err)
}

// abandon terminates the instance launched for the NodeClaim called name unless it belongs to the
// NodeClaim with UID keep; an empty keep abandons it whatever its UID. It is called once the
// NodeClaim the instance was launched for is gone, so nothing else would terminate it.
func (l *launch) abandon(ctx context.Context, name string, keep types.UID) error {
	e, ok := l.cache.take(name, keep)
	if !ok {
		return nil
	}
	if err := l.cloud.Delete(ctx, e.created); cloudprovider.IgnoreNodeClaimNotFound(err) != nil {
		// Keep it so that the retry of this request tries again.
		l.cache.restore(name, e)
		return fmt.Errorf("terminate instance %s launched for deleted nodeclaim %s: %w", e.created.Status.ProviderID, name, err)
	}
	log.FromContext(ctx).Info("terminated instance of a nodeclaim deleted during launch", "nodeclaim", name, "providerID", e.created.Status.ProviderID)
	return nil
}

// merged returns base with over's entries added (over wins). Nil stays nil when over is empty.
func merged(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	out := make(map[string]string, len(base)+len(over))
	maps.Copy(out, base)
	maps.Copy(out, over)
	return out
}

// launchCache remembers instances that were created but whose NodeClaim status may not be
// written yet, by NodeClaim name.
type launchCache struct {
	mu      sync.Mutex
	entries map[string]launchEntry
}

type launchEntry struct {
	uid     types.UID
	created *karpv1.NodeClaim
}

func newLaunchCache() *launchCache {
	return &launchCache{entries: map[string]launchEntry{}}
}

// get returns the instance launched for this NodeClaim (same name and UID).
func (c *launchCache) get(nc *karpv1.NodeClaim) (*karpv1.NodeClaim, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[nc.Name]
	if !ok || e.uid != nc.UID {
		return nil, false
	}
	return e.created, true
}

func (c *launchCache) put(nc *karpv1.NodeClaim, created *karpv1.NodeClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[nc.Name] = launchEntry{uid: nc.UID, created: created.DeepCopy()}
}

// forget drops the entry of this NodeClaim (same name and UID).
func (c *launchCache) forget(nc *karpv1.NodeClaim) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[nc.Name]; ok && e.uid == nc.UID {
		delete(c.entries, nc.Name)
	}
}

// take removes and returns the entry for name unless its UID is keep.
func (c *launchCache) take(name string, keep types.UID) (launchEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[name]
	if !ok || (keep != "" && e.uid == keep) {
		return launchEntry{}, false
	}
	delete(c.entries, name)
	return e, true
}

// restore puts back an entry that take removed, unless a newer one replaced it meanwhile.
func (c *launchCache) restore(name string, e launchEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[name]; !ok {
		c.entries[name] = e
	}
}
