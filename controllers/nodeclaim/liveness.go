package nodeclaim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// Event reasons of the liveness stage.
const (
	// ReasonRegistrationTimeout is the event reason when a launched NodeClaim's Node did not
	// register within the registration TTL.
	ReasonRegistrationTimeout = "RegistrationTimeout"
	// ReasonLaunchTimeout is the event reason when a NodeClaim did not launch within the launch TTL.
	ReasonLaunchTimeout = "LaunchTimeout"
	// ReasonInstanceNotFound is the event reason when the instance of a launched NodeClaim that has
	// not registered is gone from the cloud provider (for instance an instance a crashed Joiner
	// launched but the provider never kept).
	ReasonInstanceNotFound = "InstanceNotFound"
)

// liveness deletes NodeClaims that do not make progress: one not Launched within launchTTL of its
// creation, or not Registered within registrationTTL of its launch. It also replaces at once a
// Launched NodeClaim that has not registered and whose instance the provider no longer knows
// (Get returns a NodeClaimNotFound error), rather than letting it wait out the registration TTL:
// once instanceGrace has passed since the launch (so that a launch the provider has not caught up
// with is not taken for gone), the instance is looked up on every reconcile and at least every
// instanceGrace. Deleting hands the NodeClaim to termination, which terminates its instance, and
// the provisioner launches anew for its pods.
type liveness struct {
	kube            client.Client
	cloud           cloudprovider.CloudProvider
	clock           clock.Clock
	recorder        events.EventRecorder
	metrics         *Metrics
	registrationTTL time.Duration
	launchTTL       time.Duration
	instanceGrace   time.Duration
}

// Reconcile deletes the NodeClaim when its deadline passed or its instance is gone, or asks to be
// called back at the deadline or the next look at the instance.
func (l *liveness) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if isTrue(nc, karpv1.ConditionTypeRegistered) {
		return reconcile.Result{}, nil
	}
	start, ttl, stage, reason := nc.CreationTimestamp.Time, l.launchTTL, "launch", ReasonLaunchTimeout
	launched := false
	if c := nc.StatusCondition(karpv1.ConditionTypeLaunched); c != nil && c.Status == metav1.ConditionTrue {
		start, ttl, stage, reason = c.LastTransitionTime.Time, l.registrationTTL, "register", ReasonRegistrationTimeout
		launched = true
	}
	remaining := ttl - l.clock.Since(start)
	if remaining > 0 {
		result := reconcile.Result{RequeueAfter: remaining}
		if !launched || nc.Status.ProviderID == "" {
			return result, nil
		}
		next, gone := l.instanceGone(ctx, nc, start)
		if !gone {
			return earliest(result, reconcile.Result{RequeueAfter: next}), nil
		}
		return l.delete(ctx, nc, ReasonInstanceNotFound, fmt.Sprintf("Instance %s no longer exists and the NodeClaim never registered; deleting it", nc.Status.ProviderID),
			"deleting unregistered nodeclaim whose instance is gone")
	}
	return l.delete(ctx, nc, reason, fmt.Sprintf("NodeClaim did not %s within %s; deleting it", stage, ttl),
		"deleting nodeclaim that did not "+stage+" in time", "ttl", ttl.String())
}

// instanceGone reports whether the provider says the Launched NodeClaim's instance does not
// exist. Inside the grace period after launchedAt it does not ask; next is when to look (again).
// Errors other than NodeClaimNotFound count as "still there": the registration TTL remains the
// backstop.
func (l *liveness) instanceGone(ctx context.Context, nc *karpv1.NodeClaim, launchedAt time.Time) (next time.Duration, gone bool) {
	if wait := l.instanceGrace - l.clock.Since(launchedAt); wait > 0 {
		return wait, false
	}
	_, err := l.cloud.Get(ctx, nc.Status.ProviderID)
	switch {
	case cloudprovider.IsNodeClaimNotFound(err):
		return 0, true
	case err != nil:
		log.FromContext(ctx).V(1).Info("could not look up the instance of an unregistered nodeclaim", "error", err.Error())
	}
	return l.instanceGrace, false
}

// delete deletes the NodeClaim for reason, with an event and a log line, counts it and marks the
// in-memory copy as deleting.
func (l *liveness) delete(ctx context.Context, nc *karpv1.NodeClaim, reason, event, msg string, kv ...any) (reconcile.Result, error) {
	l.recorder.Eventf(nc, nil, corev1.EventTypeWarning, reason, "Delete", "%s", event)
	log.FromContext(ctx).Info(msg, kv...)
	err := l.kube.Delete(ctx, nc)
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("delete nodeclaim %s (%s): %w", nc.Name, reason, err)
	}
	if err == nil {
		l.metrics.disrupted(nc, disruptionReason(reason))
	}
	now := metav1.NewTime(l.clock.Now())
	nc.DeletionTimestamp = &now
	return reconcile.Result{}, nil
}
