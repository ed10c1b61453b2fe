package nodeclass

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/joiner-dev/joiner/controllers/statusreconcile"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Event reasons.
const (
	// ReasonWaitingOnNodeClaimTermination is the reason of the Warning event on a class being
	// deleted while NodeClaims still use it.
	ReasonWaitingOnNodeClaimTermination = "WaitingOnNodeClaimTermination"
	// ReasonInstanceProfileDeleted is the reason of the Normal event when termination deleted
	// the instance profile Joiner created for the class.
	ReasonInstanceProfileDeleted = "InstanceProfileDeleted"
)

// terminate finishes the deletion of a class: it waits until no NodeClaim uses the class
// (saying so in an event), runs Options.Cleanup, deletes the instance profile Joiner created
// for spec.role, and removes the finalizer.
func (c *Controller) terminate(ctx context.Context, nc *awsv1.EC2NodeClass) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(nc, awsv1.TerminationFinalizer) {
		return ctrl.Result{}, nil
	}
	claims, err := c.nodeClaimsOf(ctx, nc.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(claims) > 0 {
		slices.SortFunc(claims, func(a, b karpv1.NodeClaim) int { return strings.Compare(a.Name, b.Name) })
		c.reportWaiting(nc, claims)
		return ctrl.Result{RequeueAfter: c.opts.NodeClaimWaitPeriod}, nil
	}
	c.forgetWaiting(nc.Name)
	if c.opts.Cleanup != nil {
		if err := c.opts.Cleanup(ctx, nc); err != nil {
			return ctrl.Result{}, fmt.Errorf("clean up after EC2NodeClass %s: %w", nc.Name, err)
		}
	}
	if name := nc.Annotations[awsv1.AnnotationInstanceProfile]; name != "" {
		if err := c.deleteManagedProfile(ctx, nc, name); err != nil {
			return ctrl.Result{}, fmt.Errorf("delete instance profile %s of EC2NodeClass %s: %w", name, nc.Name, err)
		}
		c.event(nc, nil, corev1.EventTypeNormal, ReasonInstanceProfileDeleted, "Deleted instance profile %s", name)
	}
	base := nc.DeepCopy()
	controllerutil.RemoveFinalizer(nc, awsv1.TerminationFinalizer)
	if err := c.kube.Patch(ctx, nc, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) {
			return ctrl.Result{RequeueAfter: statusreconcile.ConflictRetry}, nil
		}
		return ctrl.Result{}, client.IgnoreNotFound(fmt.Errorf("remove finalizer of EC2NodeClass %s: %w", nc.Name, err))
	}
	log.FromContext(ctx).Info("EC2NodeClass terminated")
	return ctrl.Result{}, nil
}

// reportWaiting emits the waiting event when the set of NodeClaims changed since the last one.
// The event's related object is the first NodeClaim: events about the same objects within minutes
// merge into one series that keeps the first note.
func (c *Controller) reportWaiting(nc *awsv1.EC2NodeClass, claims []karpv1.NodeClaim) {
	names := make([]string, 0, len(claims))
	for _, claim := range claims {
		names = append(names, claim.Name)
	}
	shown := names
	if len(shown) > 10 {
		shown = append(slices.Clone(shown[:10]), fmt.Sprintf("and %d more", len(names)-10))
	}
	msg := fmt.Sprintf("Waiting on %d NodeClaims to terminate before deleting the EC2NodeClass: %s", len(names), strings.Join(shown, ", "))
	c.waitingMu.Lock()
	same := c.waiting[nc.Name] == msg
	c.waiting[nc.Name] = msg
	c.waitingMu.Unlock()
	if !same {
		c.event(nc, &claims[0], corev1.EventTypeWarning, ReasonWaitingOnNodeClaimTermination, "%s", msg)
	}
}

// event records an event about the class when the controller has a recorder.
func (c *Controller) event(nc *awsv1.EC2NodeClass, related runtime.Object, eventType, reason, note string, args ...any) {
	if c.recorder != nil {
		c.recorder.Eventf(nc, related, eventType, reason, "Terminate", note, args...)
	}
}

func (c *Controller) forgetWaiting(name string) {
	c.waitingMu.Lock()
	defer c.waitingMu.Unlock()
	delete(c.waiting, name)
}
