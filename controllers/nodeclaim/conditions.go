package nodeclaim

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// lifecycleConditions make up the root Ready condition of a NodeClaim, in lifecycle order.
var lifecycleConditions = []string{
	karpv1.ConditionTypeLaunched,
	karpv1.ConditionTypeRegistered,
	karpv1.ConditionTypeInitialized,
}

// reasonAwaiting is the reason of a lifecycle condition no stage has decided yet.
const reasonAwaiting = "AwaitingReconciliation"

// isTrue reports whether the NodeClaim's condition of the type is True.
func isTrue(nc *karpv1.NodeClaim, conditionType string) bool {
	return meta.IsStatusConditionTrue(nc.Status.Conditions, conditionType)
}

// initConditions sets each lifecycle condition the NodeClaim lacks to Unknown, so that
// `kubectl get` shows where a NodeClaim is from the start.
func initConditions(nc *karpv1.NodeClaim, now time.Time) {
	for _, t := range lifecycleConditions {
		if nc.StatusCondition(t) == nil {
			nc.SetCondition(now, t, metav1.ConditionUnknown, reasonAwaiting, "")
		}
	}
}

// setReady derives the root Ready condition: True when Launched, Registered and Initialized all
// are; otherwise False if one of them is False, else Unknown, with the reason and message of the
// first condition that is not True.
func setReady(nc *karpv1.NodeClaim, now time.Time) {
	status, reason, message := metav1.ConditionTrue, "Ready", ""
	for _, t := range lifecycleConditions {
		c := nc.StatusCondition(t)
		switch {
		case c != nil && c.Status == metav1.ConditionTrue:
			continue
		case c != nil && c.Status == metav1.ConditionFalse:
			if status != metav1.ConditionFalse {
				status, reason, message = metav1.ConditionFalse, "Not"+t, t+": "+c.Message
			}
		default:
			if status == metav1.ConditionTrue {
				status, reason, message = metav1.ConditionUnknown, "Not"+t, t+" is not True yet"
				if c != nil && c.Message != "" {
					message = t + ": " + c.Message
				}
			}
		}
	}
	nc.SetCondition(now, karpv1.ConditionTypeReady, status, reason, message)
}
