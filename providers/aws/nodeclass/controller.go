package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"github.com/joiner-dev/joiner/controllers/statusreconcile"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// ControllerName names the controller (logs, metrics, events).
const ControllerName = "ec2nodeclass"

// Controller reconciles EC2NodeClasses: metadata (finalizer, hash annotations, the name of the
// managed instance profile), status (resolved dependencies and conditions) and termination.
// It is safe for concurrent reconciles of different classes.
type Controller struct {
	kube     client.Client
	ec2      EC2API
	iam      IAMAPI
	ssm      SSMAPI
	clock    clock.Clock
	recorder events.EventRecorder
	opts     Options

	subnetCache        *ttlCache[[]ec2types.Subnet]
	securityGroupCache *ttlCache[[]awsv1.SecurityGroup]
	imageCache         *ttlCache[[]image]
	ssmCache           *ttlCache[string]
	ssmMissingCache    *ttlCache[bool]
	reservationCache   *ttlCache[[]ec2types.CapacityReservation]
	profileCache       *ttlCache[bool]

	// waiting remembers, per class being deleted, the NodeClaims it last reported waiting for,
	// so the event is repeated only when that changes.
	waitingMu sync.Mutex
	waiting   map[string]string
}

// NewController returns the EC2NodeClass controller. kube reads and writes the classes and reads
// NodeClaims (the manager's client); ec2, iam and ssm are the AWS clients (NewClients builds
// them with the retryer this package configures). A nil clock means the real clock; a nil
// recorder means the manager's, taken in SetupWithManager.
func NewController(kube client.Client, ec2 EC2API, iam IAMAPI, ssm SSMAPI, clk clock.Clock, recorder events.EventRecorder, opts Options) (*Controller, error) {
	switch {
	case kube == nil:
		return nil, errors.New("new EC2NodeClass controller: a Kubernetes client is required")
	case ec2 == nil || iam == nil || ssm == nil:
		return nil, errors.New("new EC2NodeClass controller: EC2, IAM and SSM clients are required")
	case opts.ClusterName == "":
		return nil, errors.New("new EC2NodeClass controller: Options.ClusterName is required (it names and tags instance profiles)")
	case opts.Region == "":
		return nil, errors.New("new EC2NodeClass controller: Options.Region is required")
	}
	clk = defaults.Clock(clk)
	opts = opts.withDefaults()
	return &Controller{
		kube: kube, ec2: ec2, iam: iam, ssm: ssm, clock: clk, recorder: recorder, opts: opts,
		subnetCache:        newTTLCache[[]ec2types.Subnet](opts.SubnetTTL, clk),
		securityGroupCache: newTTLCache[[]awsv1.SecurityGroup](opts.SecurityGroupTTL, clk),
		imageCache:         newTTLCache[[]image](opts.AMITTL, clk),
		ssmCache:           newTTLCache[string](opts.SSMTTL, clk),
		ssmMissingCache:    newTTLCache[bool](opts.AMITTL, clk),
		reservationCache:   newTTLCache[[]ec2types.CapacityReservation](opts.CapacityReservationTTL, clk),
		profileCache:       newTTLCache[bool](opts.InstanceProfileTTL, clk),
		waiting:            map[string]string{},
	}, nil
}

// SetupWithManager registers the controller: it watches EC2NodeClasses, and the deletion of
// NodeClaims, which lets a class waiting on them finish terminating.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	if c.recorder == nil {
		c.recorder = mgr.GetEventRecorder(ControllerName)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&awsv1.EC2NodeClass{}).
		Watches(&karpv1.NodeClaim{}, handler.EnqueueRequestsFromMapFunc(nodeClassOfNodeClaim),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				DeleteFunc:  func(event.DeleteEvent) bool { return true },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Complete(c)
}

func nodeClassOfNodeClaim(_ context.Context, o client.Object) []reconcile.Request {
	nodeClaim, ok := o.(*karpv1.NodeClaim)
	if !ok || !refersToEC2NodeClass(nodeClaim) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: nodeClaim.Spec.NodeClassRef.Name}}}
}

func refersToEC2NodeClass(nodeClaim *karpv1.NodeClaim) bool {
	ref := nodeClaim.Spec.NodeClassRef
	return ref != nil && ref.Group == awsv1.Group && ref.Kind == "EC2NodeClass"
}

// Reconcile brings one class up to date: termination when it is being deleted, else its
// metadata and then its status. It resolves again every ResyncPeriod.
func (c *Controller) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	nc := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, req.NamespacedName, nc); err != nil {
		if apierrors.IsNotFound(err) {
			c.forgetWaiting(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get EC2NodeClass %s: %w", req.Name, err)
	}
	if !nc.DeletionTimestamp.IsZero() {
		return c.terminate(ctx, nc)
	}
	if changed, err := c.syncMetadata(ctx, nc); err != nil || changed {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return ctrl.Result{RequeueAfter: statusreconcile.ConflictRetry}, nil
		}
		// A changed object comes back through the watch; resolving now would race it.
		return ctrl.Result{}, err
	}
	return c.syncStatus(ctx, nc)
}

// syncMetadata adds the termination finalizer, records the name of the managed instance profile
// (before creating it, so termination always knows what to delete) and writes the drift hash
// annotations. It reports whether it patched the class. When the class carries another hash
// version (an older one, or Karpenter's, on a class Joiner takes over), it first re-stamps the
// class's NodeClaims, so that a failure is retried while the class still has the old version.
func (c *Controller) syncMetadata(ctx context.Context, nc *awsv1.EC2NodeClass) (bool, error) {
	base := nc.DeepCopy()
	controllerutil.AddFinalizer(nc, awsv1.TerminationFinalizer)
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	if nc.Spec.Role != "" && nc.Annotations[awsv1.AnnotationInstanceProfile] == "" {
		nc.Annotations[awsv1.AnnotationInstanceProfile] = managedProfileName(c.opts.ClusterName, c.opts.Region, nc)
	}
	hash := Hash(nc)
	if base.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != HashVersion {
		if err := c.restampNodeClaims(ctx, nc.Name, hash); err != nil {
			return false, err
		}
	}
	nc.Annotations[awsv1.AnnotationEC2NodeClassHash] = hash
	nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = HashVersion
	if equalMetadata(base, nc) {
		return false, nil
	}
	if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return false, fmt.Errorf("update metadata of EC2NodeClass %s: %w", nc.Name, err)
	}
	return true, nil
}

func equalMetadata(a, b *awsv1.EC2NodeClass) bool {
	if len(a.Finalizers) != len(b.Finalizers) || len(a.Annotations) != len(b.Annotations) {
		return false
	}
	for i := range a.Finalizers {
		if a.Finalizers[i] != b.Finalizers[i] {
			return false
		}
	}
	for k, v := range a.Annotations {
		if w, ok := b.Annotations[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// restampNodeClaims gives the class's NodeClaims of another hash version the current version and
// hash, so that a change of the hash algorithm (or of the controller computing it) never drifts
// nodes. A NodeClaim already Drifted gets the version but keeps its hash, so it stays drifted.
func (c *Controller) restampNodeClaims(ctx context.Context, class, hash string) error {
	claims, err := c.nodeClaimsOf(ctx, class)
	if err != nil {
		return err
	}
	restamped := 0
	for i := range claims {
		claim := &claims[i]
		if claim.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] == HashVersion {
			continue
		}
		base := claim.DeepCopy()
		if claim.Annotations == nil {
			claim.Annotations = map[string]string{}
		}
		if cond := claim.StatusCondition(karpv1.ConditionTypeDrifted); cond == nil || cond.Status != "True" {
			claim.Annotations[awsv1.AnnotationEC2NodeClassHash] = hash
		}
		claim.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = HashVersion
		if err := c.kube.Patch(ctx, claim, client.MergeFrom(base)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("re-stamp NodeClaim %s with EC2NodeClass %s hash version %s: %w", claim.Name, class, HashVersion, err)
		}
		restamped++
	}
	if restamped > 0 {
		log.FromContext(ctx).Info("re-stamped NodeClaims with the current hash version", "version", HashVersion, "nodeClaims", restamped)
	}
	return nil
}

// nodeClaimsOf lists the NodeClaims whose nodeClassRef names the EC2NodeClass.
func (c *Controller) nodeClaimsOf(ctx context.Context, name string) ([]karpv1.NodeClaim, error) {
	list := &karpv1.NodeClaimList{}
	if err := c.kube.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list NodeClaims: %w", err)
	}
	var out []karpv1.NodeClaim
	for _, claim := range list.Items {
		if refersToEC2NodeClass(&claim) && claim.Spec.NodeClassRef.Name == name {
			out = append(out, claim)
		}
	}
	return out, nil
}
