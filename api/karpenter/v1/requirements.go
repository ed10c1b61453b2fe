package v1

import (
	corev1 "k8s.io/api/core/v1"
)

// Operators Karpenter adds to the Kubernetes node selector operators. Like Gt and Lt they take a
// single non-negative integer value; they include the bound.
const (
	// NodeSelectorOpGte matches label values greater than or equal to the single integer value.
	NodeSelectorOpGte corev1.NodeSelectorOperator = "Gte"
	// NodeSelectorOpLte matches label values less than or equal to the single integer value.
	NodeSelectorOpLte corev1.NodeSelectorOperator = "Lte"
)

// NodeSelectorRequirementWithMinValues is a node selector requirement (key, operator, values) with
// an optional minimum number of distinct values the scheduler must keep available for the key.
// NodePool templates and NodeClaims share it; the NodePool-only ban on the key
// "karpenter.sh/nodepool" is attached where NodePool lists its requirements. The key rules are
// core Karpenter's (karpenter.sh domain, kubernetes.io/hostname) and the AWS provider's, which
// patches both CRDs to refuse a karpenter.k8s.aws key that is not one of its well-known labels.
type NodeSelectorRequirementWithMinValues struct {
	// Key is the label key the requirement applies to.
	// +kubebuilder:validation:MaxLength=316
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	// +kubebuilder:validation:XValidation:rule=`self in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !self.find("^([^/]+)").endsWith("karpenter.sh")`,message=`label domain "karpenter.sh" is restricted`
	// +kubebuilder:validation:XValidation:rule=`self != "kubernetes.io/hostname"`,message=`label "kubernetes.io/hostname" is restricted`
	// +kubebuilder:validation:XValidation:rule=`self in ["karpenter.k8s.aws/instance-tenancy", "karpenter.k8s.aws/capacity-reservation-type", "karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-hypervisor", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-size", "karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", "karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth", "karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name", "karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count", "karpenter.k8s.aws/instance-capability-flex"] || !self.find("^([^/]+)").endsWith("karpenter.k8s.aws")`,message=`label domain "karpenter.k8s.aws" is restricted`
	// +required
	Key string `json:"key"`

	// Operator relates the key to the values: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte.
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist;Gt;Lt;Gte;Lte
	// +required
	Operator corev1.NodeSelectorOperator `json:"operator"`

	// Values are the label values. In needs at least one; Exists and DoesNotExist take none;
	// Gt, Lt, Gte and Lte take exactly one non-negative integer.
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	// +optional
	Values []string `json:"values,omitempty"`

	// MinValues is the minimum number of distinct values of Key that must stay available when the
	// scheduler narrows the requirement (alpha in Karpenter). With operator In, Values must hold at
	// least this many values.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	// +optional
	MinValues *int `json:"minValues,omitempty"`
}

// NodeSelectorRequirement returns the requirement without MinValues, as a Kubernetes node selector
// requirement.
func (r NodeSelectorRequirementWithMinValues) NodeSelectorRequirement() corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values}
}
