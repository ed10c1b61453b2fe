package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/joiner-dev/joiner/controllers/statusreconcile"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// Condition reasons of this controller beyond the API's.
const (
	// ReasonResolutionFailed means an AWS call failed: for good (the message names the call and
	// the error, typically missing permissions), or, when the condition is Unknown, transiently
	// (throttling, a server error) and the controller retries with backoff.
	ReasonResolutionFailed = "ResolutionFailed"
	// ReasonUnhealthyDependents is the reason of Ready=False: some dependency condition is False.
	ReasonUnhealthyDependents = "UnhealthyDependents"
	// ReasonDependenciesUnknown is the reason of Ready=Unknown: no dependency is False, but some
	// could not be resolved yet.
	ReasonDependenciesUnknown = "DependenciesUnknown"
)

// statusBuilder collects the conditions of one resolution.
type statusBuilder struct {
	nc        *awsv1.EC2NodeClass
	status    *awsv1.EC2NodeClassStatus
	now       metav1.Time
	deps      []string
	transient []error
}

// set records a dependency condition. A True condition's reason is its type.
func (b *statusBuilder) set(conditionType string, ok bool, reason, message string) {
	status := metav1.ConditionFalse
	if ok {
		status, reason = metav1.ConditionTrue, conditionType
	}
	b.deps = append(b.deps, conditionType)
	meta.SetStatusCondition(&b.status.Conditions, metav1.Condition{Type: conditionType, Status: status, Reason: reason,
		Message: message, ObservedGeneration: b.nc.Generation, LastTransitionTime: b.now})
}

// failed records that resolving a dependency failed with err. The resolved values stay as
// they were. A transient error keeps a condition of the current generation (or makes it
// Unknown) and is retried; any other error makes the condition False with the error.
func (b *statusBuilder) failed(conditionType string, err error) {
	if isTransient(err) {
		b.transient = append(b.transient, fmt.Errorf("%s: %w", conditionType, err))
		b.deps = append(b.deps, conditionType)
		if cur := meta.FindStatusCondition(b.status.Conditions, conditionType); cur != nil && cur.ObservedGeneration == b.nc.Generation {
			return
		}
		meta.SetStatusCondition(&b.status.Conditions, metav1.Condition{Type: conditionType, Status: metav1.ConditionUnknown,
			Reason: ReasonResolutionFailed, Message: "retrying after a transient AWS error: " + err.Error(),
			ObservedGeneration: b.nc.Generation, LastTransitionTime: b.now})
		return
	}
	msg := err.Error()
	var api *apiError
	if errors.As(err, &api) {
		msg = fmt.Sprintf("%s failed: %v: check that Joiner's IAM role allows %s", api.op, api.err, api.op)
	}
	b.set(conditionType, false, ReasonResolutionFailed, msg)
}

// ready sets Ready from the dependency conditions.
func (b *statusBuilder) ready() {
	var falses, unknowns []string
	for _, t := range b.deps {
		cond := meta.FindStatusCondition(b.status.Conditions, t)
		switch {
		case cond == nil || cond.Status == metav1.ConditionUnknown:
			msg := ""
			if cond != nil {
				msg = cond.Message
			}
			unknowns = append(unknowns, fmt.Sprintf("%s=Unknown (%s)", t, msg))
		case cond.Status == metav1.ConditionFalse:
			falses = append(falses, fmt.Sprintf("%s=False (%s)", t, cond.Message))
		}
	}
	cond := metav1.Condition{Type: awsv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: awsv1.ConditionTypeReady,
		ObservedGeneration: b.nc.Generation, LastTransitionTime: b.now}
	switch {
	case len(falses) > 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonUnhealthyDependents, strings.Join(append(falses, unknowns...), "; ")
	case len(unknowns) > 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionUnknown, ReasonDependenciesUnknown, strings.Join(unknowns, "; ")
	}
	meta.SetStatusCondition(&b.status.Conditions, cond)
}

// syncStatus resolves every dependency of the class, writes status when it changed, and asks to
// run again after ResyncPeriod, or with backoff after a transient AWS error.
func (c *Controller) syncStatus(ctx context.Context, nc *awsv1.EC2NodeClass) (ctrl.Result, error) {
	b := &statusBuilder{nc: nc, status: nc.Status.DeepCopy(), now: metav1.NewTime(c.clock.Now())}

	if subnets, err := c.subnets(ctx, nc.Spec.SubnetSelectorTerms); err != nil {
		b.failed(awsv1.ConditionTypeSubnetsReady, err)
	} else if len(subnets.items) == 0 {
		b.status.Subnets = nil
		b.set(awsv1.ConditionTypeSubnetsReady, false, awsv1.ReasonSubnetsNotFound,
			"no subnet matches "+strings.Join(subnets.unmatched, ", ")+": fix spec.subnetSelectorTerms, or tag your subnets to match")
	} else {
		b.status.Subnets = subnetStatus(subnets.items)
		var zones []string
		for _, s := range b.status.Subnets {
			zones = append(zones, s.Zone)
		}
		b.set(awsv1.ConditionTypeSubnetsReady, true, "", withUnmatched(
			fmt.Sprintf("%d subnets in %s", len(b.status.Subnets), strings.Join(slices.Compact(zones), ", ")), subnets.unmatched))
	}

	if groups, err := c.securityGroups(ctx, nc.Spec.SecurityGroupSelectorTerms); err != nil {
		b.failed(awsv1.ConditionTypeSecurityGroupsReady, err)
	} else if len(groups.items) == 0 {
		b.status.SecurityGroups = nil
		b.set(awsv1.ConditionTypeSecurityGroupsReady, false, awsv1.ReasonSecurityGroupsNotFound,
			"no security group matches "+strings.Join(groups.unmatched, ", ")+": fix spec.securityGroupSelectorTerms, or tag your security groups to match")
	} else {
		b.status.SecurityGroups = groups.items
		b.set(awsv1.ConditionTypeSecurityGroupsReady, true, "", withUnmatched(fmt.Sprintf("%d security groups", len(groups.items)), groups.unmatched))
	}

	if amis, err := c.amis(ctx, nc); err != nil {
		b.failed(awsv1.ConditionTypeAMIsReady, err)
	} else if len(amis.amis) == 0 {
		b.status.AMIs = nil
		b.set(awsv1.ConditionTypeAMIsReady, false, amis.reason, amis.message)
	} else {
		b.status.AMIs = amis.amis
		msg := fmt.Sprintf("%d AMIs", len(amis.amis))
		for _, a := range amis.amis {
			if a.Deprecated {
				msg += fmt.Sprintf("; %s (%s) is deprecated", a.ID, a.Name)
			}
		}
		b.set(awsv1.ConditionTypeAMIsReady, true, "", withUnmatched(msg, amis.unmatched))
	}

	if c.opts.DisableCapacityReservations {
		b.status.CapacityReservations = nil
		meta.RemoveStatusCondition(&b.status.Conditions, awsv1.ConditionTypeCapacityReservationsReady)
	} else if len(nc.Spec.CapacityReservationSelectorTerms) == 0 {
		b.status.CapacityReservations = nil
		b.set(awsv1.ConditionTypeCapacityReservationsReady, true, "", "")
	} else if crs, err := c.capacityReservations(ctx, nc.Spec.CapacityReservationSelectorTerms); err != nil {
		b.failed(awsv1.ConditionTypeCapacityReservationsReady, err)
	} else {
		// Reservations are optional capacity: selecting none is not an error, but says so.
		b.status.CapacityReservations = capacityReservationStatus(crs.items, c.clock.Now())
		msg := fmt.Sprintf("%d active capacity reservations", len(crs.items))
		if len(crs.items) == 0 {
			msg = "no active capacity reservation matches " + strings.Join(crs.unmatched, ", ") + ": instances launch without reserved capacity"
			crs.unmatched = nil
		}
		b.set(awsv1.ConditionTypeCapacityReservationsReady, true, "", withUnmatched(msg, crs.unmatched))
	}

	profile, err := c.instanceProfile(ctx, nc, nc.Annotations[awsv1.AnnotationInstanceProfile])
	var problem *profileProblem
	switch {
	case errors.As(err, &problem):
		b.status.InstanceProfile = ""
		b.set(awsv1.ConditionTypeInstanceProfileReady, false, problem.reason, problem.message)
	case err != nil:
		b.failed(awsv1.ConditionTypeInstanceProfileReady, err)
	default:
		b.status.InstanceProfile = profile
		msg := "instance profile " + profile
		if nc.Spec.Role != "" {
			msg += " holds role " + roleName(nc.Spec.Role)
		}
		b.set(awsv1.ConditionTypeInstanceProfileReady, true, "", msg)
	}

	b.ready()
	if !equality.Semantic.DeepEqual(&nc.Status, b.status) {
		patch := client.MergeFromWithOptions(nc.DeepCopy(), client.MergeFromWithOptimisticLock{})
		nc.Status = *b.status
		if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
			if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
				return ctrl.Result{RequeueAfter: statusreconcile.ConflictRetry}, nil
			}
			return ctrl.Result{}, fmt.Errorf("update status of EC2NodeClass %s: %w", nc.Name, err)
		}
		ready := meta.FindStatusCondition(b.status.Conditions, awsv1.ConditionTypeReady)
		log.FromContext(ctx).Info("updated EC2NodeClass status", "ready", ready.Status, "reason", ready.Reason, "message", ready.Message,
			"subnets", len(b.status.Subnets), "securityGroups", len(b.status.SecurityGroups), "amis", len(b.status.AMIs),
			"capacityReservations", len(b.status.CapacityReservations), "instanceProfile", b.status.InstanceProfile)
	}
	if len(b.transient) > 0 {
		return ctrl.Result{}, fmt.Errorf("resolve EC2NodeClass %s: %w", nc.Name, errors.Join(b.transient...))
	}
	return ctrl.Result{RequeueAfter: c.opts.ResyncPeriod}, nil
}

// withUnmatched adds the terms that matched nothing to a True condition's message: they may be
// typos even when other terms matched.
func withUnmatched(msg string, unmatched []string) string {
	if len(unmatched) == 0 {
		return msg
	}
	return msg + "; matched nothing: " + strings.Join(unmatched, ", ")
}
