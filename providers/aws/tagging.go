package aws

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// TaggingControllerName names the controller that tags the instances of registered NodeClaims.
const TaggingControllerName = "nodeclaim.tagging"

// AnnotationClusterNameTagged is the annotation Karpenter's tagging controller writes, next to
// awsv1.AnnotationClaimTagged, once the instance also carries eks:eks-cluster-name. Karpenter
// tags an instance again unless both are "true".
const AnnotationClusterNameTagged = "compatibility.karpenter.k8s.aws/cluster-name-tagged"

// DefaultTagInterval is the least time between two CreateTags calls: CreateTags draws on the same
// EC2 request budget as CreateFleet, so tagging must not starve launches (Karpenter makes at most
// one a second too).
const DefaultTagInterval = time.Second

// tagRetry bounds the backoff between attempts to tag the instance of one NodeClaim.
const tagRetryMin, tagRetryMax = time.Second, 5 * time.Minute

// tagger gives the instance of each registered NodeClaim of an EC2NodeClass the tags Karpenter's
// tagging controller adds once the Node is known: Name = the Node's name, karpenter.sh/nodeclaim
// = the NodeClaim's name, eks:eks-cluster-name = the cluster. A tag the instance has already,
// whatever its value (a Name set in spec.tags, say), is left as it is. Then it annotates the
// NodeClaim karpenter.k8s.aws/tagged=true and compatibility.karpenter.k8s.aws/cluster-name-tagged=true,
// as Karpenter does, so that neither Joiner nor Karpenter tags it again. It runs on the leader,
// one NodeClaim at a time, spaces CreateTags calls by the interval, and retries a failure with a
// growing backoff; nothing else waits for the tags, so a failure never holds up a NodeClaim.
type tagger struct {
	kube     client.Client
	p        *Provider
	clock    clock.Clock
	log      logr.Logger
	interval time.Duration

	mu   sync.Mutex
	next time.Time // no CreateTags before this
}

var _ cloudprovider.Controller = (*tagger)(nil)

func newTagger(kube client.Client, p *Provider, clk clock.Clock, log logr.Logger) *tagger {
	return &tagger{kube: kube, p: p, clock: clk, log: log, interval: DefaultTagInterval}
}

// SetupWithManager registers the tagger: it watches the NodeClaims that taggable accepts.
func (t *tagger) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named(TaggingControllerName).
		For(&karpv1.NodeClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			nc, ok := o.(*karpv1.NodeClaim)
			return ok && taggable(nc)
		}))).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: 1,
			RateLimiter:             workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](tagRetryMin, tagRetryMax),
		}).
		Complete(t)
	if err != nil {
		return fmt.Errorf("set up %s controller: %w", TaggingControllerName, err)
	}
	return nil
}

// taggable reports whether the NodeClaim is of an EC2NodeClass, registered (status.nodeName),
// not being deleted, and not yet marked tagged.
func taggable(nc *karpv1.NodeClaim) bool {
	ref := nc.Spec.NodeClassRef
	return ref != nil && ref.Group == awsv1.Group && ref.Kind == NodeClassKind &&
		nc.Status.NodeName != "" && nc.DeletionTimestamp.IsZero() &&
		(nc.Annotations[awsv1.AnnotationClaimTagged] != "true" || nc.Annotations[AnnotationClusterNameTagged] != "true")
}

// Reconcile tags the NodeClaim's instance and marks the NodeClaim tagged.
func (t *tagger) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	nc := &karpv1.NodeClaim{}
	if err := t.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if !taggable(nc) {
		return reconcile.Result{}, nil
	}
	id, err := ParseProviderID(nc.Status.ProviderID)
	if err != nil {
		t.log.Info("not tagging: the provider ID names no EC2 instance", "nodeclaim", nc.Name, "error", err.Error())
		return reconcile.Result{}, nil
	}
	tagged, err := t.tagInstance(ctx, nc, id)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("tag instance %s of nodeclaim %s (retried with backoff): %w", id, nc.Name, err)
	}
	if !tagged {
		return reconcile.Result{}, nil // the instance is gone: garbage collection's business
	}
	stored := nc.DeepCopy()
	nc.Annotations = withEntries(nc.Annotations, map[string]string{awsv1.AnnotationClaimTagged: "true", AnnotationClusterNameTagged: "true"})
	if err := t.kube.Patch(ctx, nc, client.MergeFrom(stored)); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("mark nodeclaim %s tagged: %w", nc.Name, err))
	}
	return reconcile.Result{}, nil
}

// tagInstance adds the tags the instance lacks. It reports false when the instance is gone.
func (t *tagger) tagInstance(ctx context.Context, nc *karpv1.NodeClaim, id string) (bool, error) {
	inst, err := t.p.describeInstance(ctx, id)
	if cloudprovider.IsNodeClaimNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	missing := missingTags(inst.Tags, registrationTags(nc, t.p.opts.ClusterName))
	if len(missing) == 0 {
		return true, nil
	}
	if err := t.wait(ctx); err != nil {
		return false, err
	}
	_, err = t.p.opts.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: ec2Tags(missing)})
	if hasCode(err, codeInstanceNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	t.log.V(1).Info("tagged instance", "nodeclaim", nc.Name, "instance", id, "tags", slices.Sorted(maps.Keys(missing)))
	return true, nil
}

// wait blocks until the interval since the previous CreateTags has passed (or ctx ends), and
// books the next slot.
func (t *tagger) wait(ctx context.Context) error {
	t.mu.Lock()
	now := t.clock.Now()
	at := t.next
	if at.Before(now) {
		at = now
	}
	t.next = at.Add(t.interval)
	t.mu.Unlock()
	if d := at.Sub(now); d > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.clock.After(d):
		}
	}
	return nil
}

// registrationTags are the tags an instance gets once its Node registered.
func registrationTags(nc *karpv1.NodeClaim, cluster string) map[string]string {
	return map[string]string{
		awsv1.TagName:           nc.Status.NodeName,
		awsv1.TagNodeClaim:      nc.Name,
		awsv1.TagEKSClusterName: cluster,
	}
}

// missingTags returns the entries of want whose key have has not.
func missingTags(have, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if _, ok := have[k]; !ok {
			out[k] = v
		}
	}
	return out
}

// withEntries returns m with the entries added (a new map; m is not changed).
func withEntries(m, entries map[string]string) map[string]string {
	out := make(map[string]string, len(m)+len(entries))
	maps.Copy(out, m)
	maps.Copy(out, entries)
	return out
}
