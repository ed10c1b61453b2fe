package podpredicates

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/joiner-dev/joiner/controllers/nodepredicates"
)

// Changed reports whether a pod update changed anything Joiner's provisioning and disruption read
// from a pod: its labels, annotations, owner references, finalizers or deletion, its spec
// (binding, requests, scheduling constraints), or its phase, start time, nominated node or the
// type, status or reason of a condition. Status churn they do not read (container statuses and
// restart counts, IPs, QoS class, condition probe and transition times, messages) and a new
// resourceVersion or managedFields entry are no change.
func Changed(oldPod, newPod *corev1.Pod) bool {
	om, nm := &oldPod.ObjectMeta, &newPod.ObjectMeta
	olds, news := &oldPod.Status, &newPod.Status
	switch {
	case (om.DeletionTimestamp == nil) != (nm.DeletionTimestamp == nil),
		olds.Phase != news.Phase,
		olds.NominatedNodeName != news.NominatedNodeName,
		!equality.Semantic.DeepEqual(olds.StartTime, news.StartTime),
		!equality.Semantic.DeepEqual(om.Labels, nm.Labels),
		!equality.Semantic.DeepEqual(om.Annotations, nm.Annotations),
		!equality.Semantic.DeepEqual(om.OwnerReferences, nm.OwnerReferences),
		!equality.Semantic.DeepEqual(om.Finalizers, nm.Finalizers),
		!equality.Semantic.DeepEqual(oldPod.Spec, newPod.Spec):
		return true
	}
	return nodepredicates.ConditionsDiffer(olds.Conditions, news.Conditions, func(c corev1.PodCondition) [3]string {
		return [3]string{string(c.Type), string(c.Status), c.Reason}
	})
}

// OnChange is the watch predicate of pods for the controllers that react to what Changed
// compares: creates, deletes and generic events pass, and updates pass only when Changed says so
// (nodepredicates.OnUpdate).
func OnChange() predicate.Predicate {
	return nodepredicates.OnUpdate(Changed)
}
