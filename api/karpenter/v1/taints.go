package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Taint is a Kubernetes node taint with Karpenter's schema rules. It has exactly the fields of
// corev1.Taint, so the two convert directly: corev1.Taint(t) and Taint(ct).
type Taint struct {
	// Key is the taint key, a qualified name such as "nvidia.com/gpu".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +required
	Key string `json:"key"`
	// Value is the optional taint value.
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +optional
	Value string `json:"value,omitempty"`
	// Effect is what the taint does to pods that do not tolerate it.
	// +kubebuilder:validation:Enum=NoSchedule;PreferNoSchedule;NoExecute
	// +required
	Effect corev1.TaintEffect `json:"effect"`
	// TimeAdded is when a NoExecute taint was added; set by Kubernetes, not by users.
	// +optional
	TimeAdded *metav1.Time `json:"timeAdded,omitempty"`
}

// ToCore returns the taint as a corev1.Taint.
func (t Taint) ToCore() corev1.Taint {
	return corev1.Taint(t)
}

// String formats the taint as key=value:effect, like kubectl.
func (t Taint) String() string {
	ct := corev1.Taint(t)
	return ct.ToString()
}

// TaintsToCore converts taints to corev1 taints. Nil stays nil.
func TaintsToCore(taints []Taint) []corev1.Taint {
	if taints == nil {
		return nil
	}
	out := make([]corev1.Taint, len(taints))
	for i, t := range taints {
		out[i] = corev1.Taint(t)
	}
	return out
}

// TaintsFromCore converts corev1 taints to taints. Nil stays nil.
func TaintsFromCore(taints []corev1.Taint) []Taint {
	if taints == nil {
		return nil
	}
	out := make([]Taint, len(taints))
	for i, t := range taints {
		out[i] = Taint(t)
	}
	return out
}
