// Package localtest is test support for the local provider: it breaks local instances on purpose,
// as a machine whose kubelet dies would. It is imported by tests only (the controller has no RBAC
// grant for what it writes) and must never be wired into a binary.
package localtest

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/providers/local"
)

// Reasons of the Ready condition FailNode sets.
const (
	// ReasonNodeStatusUnknown is kube-controller-manager's reason for a Node whose kubelet stopped
	// posting its status (Ready=Unknown).
	ReasonNodeStatusUnknown = "NodeStatusUnknown"
	// ReasonKubeletNotReady is the kubelet's reason for a Node it reports not ready (Ready=False).
	ReasonKubeletNotReady = "KubeletNotReady"
)

// FailNode makes the Node of a local instance unhealthy on purpose, as a machine whose kubelet
// died (status Unknown) or reports it broken (status False): it takes the Node from kwok (removes
// local.KwokNodeAnnotation), so that kwok stops writing its status, and sets its Ready condition to
// status, transitioned at now. The Node stays so until it is deleted. Any other status is an error.
//
// kwok (v0.8.0) forgets a Node only when it sees it deleted with its annotation, so it keeps
// renewing the failed Node's Lease and running its pods, which lets a drain finish as on a live
// kubelet; after the Node is deleted it may recreate that Lease in kube-node-lease. That is
// acceptable in a test cluster, which is all FailNode is for.
func FailNode(ctx context.Context, kube client.Client, name string, status corev1.ConditionStatus, now time.Time) error {
	reason, message := ReasonNodeStatusUnknown, "Kubelet stopped posting node status (failure injected by the test)."
	switch status {
	case corev1.ConditionUnknown:
	case corev1.ConditionFalse:
		reason, message = ReasonKubeletNotReady, "node failed (failure injected by the test)"
	default:
		return fmt.Errorf("fail node %s: status %q: want %q or %q", name, status, corev1.ConditionFalse, corev1.ConditionUnknown)
	}
	node := &corev1.Node{}
	if err := kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		return fmt.Errorf("fail node %s: %w", name, err)
	}
	if _, ok := node.Annotations[local.KwokNodeAnnotation]; ok {
		stored := node.DeepCopy()
		delete(node.Annotations, local.KwokNodeAnnotation)
		if err := kube.Patch(ctx, node, client.MergeFrom(stored)); err != nil {
			return fmt.Errorf("fail node %s: take it from kwok: %w", name, err)
		}
	}
	cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: status, Reason: reason, Message: message,
		LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
	// kwok may still be writing the Node's status when it lets go of it: retry on a conflict with
	// the Node read again, so that the condition is never written over a newer status.
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		if err := kube.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err
		}
		stored := node.DeepCopy()
		i := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
		if i < 0 {
			node.Status.Conditions = append(node.Status.Conditions, cond)
		} else {
			node.Status.Conditions[i] = cond
		}
		return kube.Status().Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{}))
	})
	if err != nil {
		return fmt.Errorf("fail node %s: set Ready=%s: %w", name, status, err)
	}
	return nil
}
