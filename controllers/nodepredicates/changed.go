package nodepredicates

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Changed reports whether a Node update changed anything Joiner's controllers read from a Node:
// its labels, annotations, finalizers, owner references or deletion, its spec (provider ID,
// taints, unschedulable), its capacity and allocatable, or the type, status, reason or message of
// a condition. A heartbeat (only status.conditions[].lastHeartbeatTime moves), a new
// resourceVersion or managedFields entry, or status the controllers do not read (images, addresses,
// node info, volumes) is no change.
func Changed(oldNode, newNode *corev1.Node) bool {
	om, nm := &oldNode.ObjectMeta, &newNode.ObjectMeta
	switch {
	case (om.DeletionTimestamp == nil) != (nm.DeletionTimestamp == nil),
		!equality.Semantic.DeepEqual(om.Labels, nm.Labels),
		!equality.Semantic.DeepEqual(om.Annotations, nm.Annotations),
		!equality.Semantic.DeepEqual(om.Finalizers, nm.Finalizers),
		!equality.Semantic.DeepEqual(om.OwnerReferences, nm.OwnerReferences),
		!equality.Semantic.DeepEqual(oldNode.Spec, newNode.Spec),
		!equality.Semantic.DeepEqual(oldNode.Status.Capacity, newNode.Status.Capacity),
		!equality.Semantic.DeepEqual(oldNode.Status.Allocatable, newNode.Status.Allocatable):
		return true
	}
	return ConditionsDiffer(oldNode.Status.Conditions, newNode.Status.Conditions, func(c corev1.NodeCondition) [4]string {
		return [4]string{string(c.Type), string(c.Status), c.Reason, c.Message}
	})
}

// ConditionsDiffer reports whether two condition lists (of any kind; each type at most once per
// list) differ in what key returns for their conditions, in any order. Key picks what counts: the
// type, status and reason, say, and not the heartbeat and transition times.
func ConditionsDiffer[C any, K comparable](a, b []C, key func(C) K) bool {
	if len(a) != len(b) {
		return true
	}
	keys := make(map[K]bool, len(b))
	for _, c := range b {
		keys[key(c)] = true
	}
	for _, c := range a {
		if !keys[key(c)] {
			return true
		}
	}
	return false
}

// OnChange is the watch predicate of Nodes for the controllers that react to what Changed
// compares (OnUpdate(Changed)). It keeps Node heartbeats from waking them.
func OnChange() predicate.Predicate {
	return OnUpdate(Changed)
}

// OnUpdate is the watch predicate of objects of type T that passes creates, deletes and generic
// events, and updates only when changed reports a change (an update whose objects are not both T
// passes). Pods use it too (podpredicates.OnChange).
func OnUpdate[T client.Object](changed func(oldObj, newObj T) bool) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		oldObj, ok1 := e.ObjectOld.(T)
		newObj, ok2 := e.ObjectNew.(T)
		return !ok1 || !ok2 || changed(oldObj, newObj)
	}}
}
