package v1

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCondition sets a condition in conds, stamped with the object's generation, and reports whether
// anything changed. LastTransitionTime becomes now only when the condition is new or its status
// changes (meta.SetStatusCondition keeps it otherwise).
func setCondition(conds *[]metav1.Condition, generation int64, now time.Time, conditionType string, status metav1.ConditionStatus, reason, message string) bool {
	return meta.SetStatusCondition(conds, metav1.Condition{
		Type:               conditionType,
		Status:             status,
		Reason:             reason,
		Message:            message,
		ObservedGeneration: generation,
		LastTransitionTime: metav1.NewTime(now),
	})
}
