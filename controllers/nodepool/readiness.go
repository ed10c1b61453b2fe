package nodepool

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Condition reasons.
const (
	// ReasonNodeClassReady is the reason of NodeClassReady=True.
	ReasonNodeClassReady = "NodeClassReady"
	// ReasonNodeClassNotFound is the reason of NodeClassReady=False when the referenced node
	// class (or its kind) does not exist.
	ReasonNodeClassNotFound = "NodeClassNotFound"
	// ReasonNodeClassNotReady is the reason of NodeClassReady=False (or Unknown) when the node
	// class is not Ready (or has not said yet).
	ReasonNodeClassNotReady = "NodeClassNotReady"
	// ReasonNodeClassTerminating is the reason of NodeClassReady=False while the node class is
	// being deleted.
	ReasonNodeClassTerminating = "NodeClassTerminating"
	// ReasonValidationSucceeded is the reason of ValidationSucceeded=True (see validation.go).
	ReasonValidationSucceeded = "ValidationSucceeded"
	// ReasonReady is the reason of Ready=True.
	ReasonReady = "Ready"
)

// nodeClassRefPath is the field users fix when the node class cannot be found.
const nodeClassRefPath = "spec.template.spec.nodeClassRef"

// readiness sets NodeClassReady from the referenced node class's Ready condition, and the root
// Ready from it and ValidationSucceeded (which validate sets first).
func (c *Controller) readiness(ctx context.Context, np *karpv1.NodePool) error {
	now := c.clock.Now()
	status, reason, message, err := c.nodeClassReadiness(ctx, np)
	if err != nil {
		return err
	}
	np.SetCondition(now, karpv1.ConditionTypeNodeClassReady, status, reason, message)
	status, reason, message = metav1.ConditionTrue, ReasonReady, ""
	for _, t := range []string{karpv1.ConditionTypeValidationSucceeded, karpv1.ConditionTypeNodeClassReady} {
		cond := np.StatusCondition(t)
		switch {
		case cond.Status == metav1.ConditionTrue:
		case cond.Status == metav1.ConditionFalse && status != metav1.ConditionFalse:
			status, reason, message = metav1.ConditionFalse, cond.Reason, t+": "+cond.Message
		case cond.Status != metav1.ConditionFalse && status == metav1.ConditionTrue:
			status, reason, message = metav1.ConditionUnknown, cond.Reason, t+": "+cond.Message
		}
	}
	np.SetCondition(now, karpv1.ConditionTypeReady, status, reason, message)
	return nil
}

// nodeClassReadiness reads the referenced node class, whatever its kind, as an unstructured
// object and returns the NodeClassReady condition it implies. It also records the class's
// generation in status.nodeClassObservedGeneration.
func (c *Controller) nodeClassReadiness(ctx context.Context, np *karpv1.NodePool) (metav1.ConditionStatus, string, string, error) {
	ref := np.Spec.Template.Spec.NodeClassRef
	if ref == nil {
		return metav1.ConditionFalse, ReasonNodeClassNotFound, nodeClassRefPath + " is not set; point it at a node class", nil
	}
	gk := ref.GroupKind()
	mapping, err := c.mapper.RESTMapping(gk)
	if meta.IsNoMatchError(err) {
		return metav1.ConditionFalse, ReasonNodeClassNotFound,
			fmt.Sprintf("%s: the cluster serves no kind %s in group %s; install its CRD or fix group and kind", nodeClassRefPath, ref.Kind, ref.Group), nil
	}
	if err != nil {
		return "", "", "", fmt.Errorf("resolve node class kind %s of nodepool %s: %w", gk, np.Name, err)
	}
	class := &unstructured.Unstructured{}
	class.SetGroupVersionKind(mapping.GroupVersionKind)
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		if apierrors.IsNotFound(err) {
			return metav1.ConditionFalse, ReasonNodeClassNotFound,
				fmt.Sprintf("%s: %s %q not found; create it or point %s at an existing one", nodeClassRefPath, ref.Kind, ref.Name, nodeClassRefPath), nil
		}
		return "", "", "", fmt.Errorf("get %s %s of nodepool %s: %w", ref.Kind, ref.Name, np.Name, err)
	}
	np.Status.NodeClassObservedGeneration = class.GetGeneration()
	if class.GetDeletionTimestamp() != nil {
		return metav1.ConditionFalse, ReasonNodeClassTerminating, fmt.Sprintf("%s %s is being deleted", ref.Kind, ref.Name), nil
	}
	ready := readyCondition(class)
	switch {
	case ready == nil:
		return metav1.ConditionUnknown, ReasonNodeClassNotReady, fmt.Sprintf("%s %s has not reported a Ready condition yet", ref.Kind, ref.Name), nil
	case ready.Status == metav1.ConditionTrue:
		return metav1.ConditionTrue, ReasonNodeClassReady, "", nil
	case ready.Status == metav1.ConditionFalse:
		return metav1.ConditionFalse, ReasonNodeClassNotReady, fmt.Sprintf("%s %s is not ready: %s", ref.Kind, ref.Name, ready.Message), nil
	default:
		return metav1.ConditionUnknown, ReasonNodeClassNotReady, fmt.Sprintf("%s %s readiness is unknown: %s", ref.Kind, ref.Name, ready.Message), nil
	}
}

// readyCondition returns the Ready condition in the object's status.conditions, or nil.
func readyCondition(obj *unstructured.Unstructured) *metav1.Condition {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != karpv1.ConditionTypeReady {
			continue
		}
		status, _ := m["status"].(string)
		message, _ := m["message"].(string)
		reason, _ := m["reason"].(string)
		return &metav1.Condition{Type: karpv1.ConditionTypeReady, Status: metav1.ConditionStatus(status), Message: message, Reason: reason}
	}
	return nil
}
