package interruption

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
)

// deleter deletes NodeClaims for the interruption controller and the instance-status poller,
// each at most once per deletedTTL: EC2 reports an instance more than once (a warning, then its
// state changes; an impaired check on every poll), and the cache can still show a NodeClaim
// undeleted when the next report comes, so another report must neither delete nor count it again.
type deleter struct {
	kube  client.Client
	clock clock.Clock

	mu sync.Mutex
	// deleted is when each NodeClaim (by UID) was deleted.
	deleted map[types.UID]time.Time
}

// deletedTTL is how long a deleted NodeClaim is remembered.
const deletedTTL = 10 * time.Minute

func newDeleter(kube client.Client, clk clock.Clock) *deleter {
	return &deleter{kube: kube, clock: clk, deleted: map[types.UID]time.Time{}}
}

// delete deletes nc unless it is already being deleted (or this deleter deleted it within
// deletedTTL), and reports whether it did. Forceful first stamps
// karpenter.sh/nodeclaim-termination-timestamp with now, so that termination drains with a
// deadline already past: pods are deleted at once, bypassing PodDisruptionBudgets, as for an
// instance that cannot run them. A NodeClaim gone or replaced meanwhile is not an error.
func (d *deleter) delete(ctx context.Context, nc *karpv1.NodeClaim, forceful bool) (bool, error) {
	if nc.DeletionTimestamp != nil || !d.claim(nc.UID) {
		return false, nil
	}
	if forceful {
		if err := d.stampDeadline(ctx, nc); err != nil {
			d.release(nc.UID)
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			return false, fmt.Errorf("stamp the termination deadline on nodeclaim %s: %w", nc.Name, err)
		}
	}
	err := d.kube.Delete(ctx, nc, client.Preconditions{UID: &nc.UID})
	switch {
	case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		// Gone already, or a new NodeClaim of the same name: nothing left of this one to delete.
		return false, nil
	case err != nil:
		d.release(nc.UID)
		return false, fmt.Errorf("delete nodeclaim %s: %w", nc.Name, err)
	}
	return true, nil
}

// stampDeadline sets the termination deadline annotation to now, keeping an earlier one.
func (d *deleter) stampDeadline(ctx context.Context, nc *karpv1.NodeClaim) error {
	now := d.clock.Now().UTC()
	if v, ok := nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey]; ok {
		if t, err := time.Parse(time.RFC3339, v); err == nil && !t.After(now) {
			return nil
		}
	}
	stored := nc.DeepCopy()
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	nc.Annotations[karpv1.NodeClaimTerminationTimestampAnnotationKey] = now.Format(time.RFC3339)
	return d.kube.Patch(ctx, nc, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
}

// claim records that the NodeClaim is deleted now, and reports false when it already was within
// deletedTTL.
func (d *deleter) claim(uid types.UID) bool {
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	for u, at := range d.deleted {
		if now.Sub(at) >= deletedTTL {
			delete(d.deleted, u)
		}
	}
	if _, done := d.deleted[uid]; done {
		return false
	}
	d.deleted[uid] = now
	return true
}

// release forgets a deletion that failed, so that a retry deletes again.
func (d *deleter) release(uid types.UID) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.deleted, uid)
}

// nodesOf returns the Nodes of a NodeClaim, logging (not failing) when they cannot be read: the
// Events then go to the NodeClaim only.
func nodesOf(ctx context.Context, kube client.Reader, nc *karpv1.NodeClaim, logErr func(error)) []corev1.Node {
	nodes, err := fieldindex.NodesForProviderID(ctx, kube, nc.Status.ProviderID)
	if err != nil {
		logErr(err)
	}
	return nodes
}

// record emits an Event on the NodeClaim and each of its Nodes.
func record(rec events.EventRecorder, nc *karpv1.NodeClaim, nodes []corev1.Node, eventType, reason, action, note string) {
	objs := []runtime.Object{nc}
	for i := range nodes {
		objs = append(objs, &nodes[i])
	}
	for _, o := range objs {
		rec.Eventf(o, nil, eventType, reason, action, "%s", note)
	}
}

// setUp gives a runnable of the package the manager's event recorder under name (when *rec is
// nil), indexes NodeClaims by instance ID and adds it to mgr.
func setUp(mgr manager.Manager, r manager.Runnable, name string, rec *events.EventRecorder, instanceID func(string) (string, error)) error {
	if *rec == nil {
		*rec = mgr.GetEventRecorder(name)
	}
	if err := indexNodeClaims(context.Background(), mgr.GetFieldIndexer(), instanceID); err != nil {
		return err
	}
	if err := mgr.Add(r); err != nil {
		return fmt.Errorf("add the %s controller: %w", name, err)
	}
	return nil
}

// indexNodeClaims registers InstanceIDField and the fieldindex indexes with indexer. Both the
// interruption controller and the instance-status poller call it; a second registration of the
// same index is not an error.
func indexNodeClaims(ctx context.Context, indexer client.FieldIndexer, instanceID func(string) (string, error)) error {
	if err := fieldindex.Index(ctx, indexer, &karpv1.NodeClaim{}, "nodeclaims", InstanceIDField, instanceIDOf(instanceID)); err != nil {
		return err
	}
	return fieldindex.Register(ctx, indexer)
}

// instanceIDOf returns the value of InstanceIDField for a NodeClaim: the instance ID that
// instanceID reads from its status.providerID, or "" (not indexed).
func instanceIDOf(instanceID func(string) (string, error)) func(*karpv1.NodeClaim) string {
	return func(nc *karpv1.NodeClaim) string {
		if nc.Status.ProviderID == "" {
			return ""
		}
		id, err := instanceID(nc.Status.ProviderID)
		if err != nil {
			return ""
		}
		return id
	}
}

// registerMetrics registers *m with reg (nil registers none) and keeps the registered collectors
// in *m: RegisterMetrics of the controller and of the poller.
func registerMetrics[M interface {
	register(prometheus.Registerer) (M, error)
}](m *M, reg prometheus.Registerer) error {
	got, err := (*m).register(reg)
	if err != nil {
		return err
	}
	*m = got
	return nil
}

// claimsOf returns the NodeClaims of an EC2 instance (normally zero or one).
func claimsOf(ctx context.Context, kube client.Reader, instanceID string) ([]karpv1.NodeClaim, error) {
	claims := &karpv1.NodeClaimList{}
	if err := kube.List(ctx, claims, client.MatchingFields{InstanceIDField: instanceID}); err != nil {
		return nil, fmt.Errorf("list the nodeclaims of instance %s: %w", instanceID, err)
	}
	return claims.Items, nil
}

// pollLoop calls poll until ctx ends: again after every when it succeeds (at once when every is
// 0), and after a backoff from retryMin, doubling up to retryMax, when it fails (logged with
// what).
func pollLoop(ctx context.Context, clk clock.Clock, log logr.Logger, what string, every, retryMin, retryMax time.Duration, poll func(context.Context) error) {
	backoff := retryMin
	for ctx.Err() == nil {
		wait := every
		if err := poll(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Error(err, what+"; retrying", "in", backoff.String())
			wait, backoff = backoff, min(2*backoff, retryMax)
		} else {
			backoff = retryMin
		}
		if wait <= 0 {
			continue
		}
		select {
		case <-ctx.Done():
		case <-clk.After(wait):
		}
	}
}

// orDefault sets *d to def when it is not positive.
func orDefault(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// clockAndLog returns clk and log, the real clock for a nil clk and a discarding logger for an
// empty log.
func clockAndLog(clk clock.Clock, log logr.Logger) (clock.Clock, logr.Logger) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	return clk, log
}
