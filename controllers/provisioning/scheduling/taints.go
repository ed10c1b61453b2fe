package scheduling

import (
	corev1 "k8s.io/api/core/v1"
)

// tolerates reports whether one of the tolerations matches the taint: same effect (or none
// given), same key (or an empty key with Exists, which matches every key), and for Equal the same
// value.
func tolerates(tolerations []corev1.Toleration, taint *corev1.Taint) bool {
	for i := range tolerations {
		t := &tolerations[i]
		if t.Effect != "" && t.Effect != taint.Effect {
			continue
		}
		if t.Key == "" {
			if t.Operator == corev1.TolerationOpExists {
				return true
			}
			continue
		}
		if t.Key != taint.Key {
			continue
		}
		switch t.Operator {
		case corev1.TolerationOpExists:
			return true
		case corev1.TolerationOpEqual, "":
			if t.Value == taint.Value {
				return true
			}
		}
	}
	return false
}

// untolerated returns the first taint with a NoSchedule or NoExecute effect that the tolerations
// do not cover and, separately, the first such PreferNoSchedule taint.
func untolerated(tolerations []corev1.Toleration, taints []corev1.Taint) (hard, soft *corev1.Taint) {
	for i := range taints {
		t := &taints[i]
		if tolerates(tolerations, t) {
			continue
		}
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			if soft == nil {
				soft = t
			}
			continue
		}
		if hard == nil {
			hard = t
		}
	}
	return hard, soft
}
