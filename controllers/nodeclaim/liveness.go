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
)

// Event reasons of the liveness stage.
const (
	// ReasonRegistrationTimeout is the event reason when a launched NodeClaim's Node did not
	// register within the registration TTL.
	ReasonRegistrationTimeout = "RegistrationTimeout"
	// ReasonLaunchTimeout is the event reason when a NodeClaim did not launch within the launch TTL.
	ReasonLaunchTimeout = "LaunchTimeout"
)

// liveness deletes NodeClaims that do not make progress: one not Launched within launchTTL of its
// creation, or not Registered within registrationTTL of its launch. Deleting hands the NodeClaim
// to termination, which terminates its instance.
type liveness struct {
	kube            client.Client
	clock           clock.Clock
	recorder        events.EventRecorder
	metrics         *Metrics
	registrationTTL time.Duration
	launchTTL       time.Duration
}

// Reconcile deletes the NodeClaim when its deadline passed, or asks to be called back at the
// deadline.
func (l *liveness) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if isTrue(nc, karpv1.ConditionTypeRegistered) {
		return reconcile.Result{}, nil
	}
	start, ttl, stage, reason := nc.CreationTimestamp.Time, l.launchTTL, "launch", ReasonLaunchTimeout
	if c := nc.StatusCondition(karpv1.ConditionTypeLaunched); c != nil && c.Status == metav1.ConditionTrue {
		start, ttl, stage, reason = c.LastTransitionTime.Time, l.registrationTTL, "register", ReasonRegistrationTimeout
	}
	if remaining := ttl - l.clock.Since(start); remaining > 0 {
		return reconcile.Result{RequeueAfter: remaining}, nil
	}
	l.recorder.Eventf(nc, nil, corev1.EventTypeWarning, reason, "Delete", "NodeClaim did not %s within %s; deleting it", stage, ttl)
	log.FromContext(ctx).Info("deleting nodeclaim that did not "+stage+" in time", "ttl", ttl.String())
	err := l.kube.Delete(ctx, nc)
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, fmt.Errorf("delete nodeclaim %s that did not %s within %s: %w", nc.Name, stage, ttl, err)
	}
	if err == nil {
		l.metrics.disrupted(nc, disruptionReason(reason))
	}
	now := metav1.NewTime(l.clock.Now())
	nc.DeletionTimestamp = &now
	return reconcile.Result{}, nil
}
