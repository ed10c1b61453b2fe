package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KubeletConfiguration is the subset of the kubelet's configuration that an EC2NodeClass may set. Field
// names and meanings follow the upstream kubelet KubeletConfiguration.
type KubeletConfiguration struct {
	// ClusterDNS are the IP addresses of the cluster DNS servers.
	// +optional
	ClusterDNS []string `json:"clusterDNS,omitempty"`

	// MaxPods overrides the maximum number of pods on a node.
	//
	// +kubebuilder:validation:Minimum=0
	// +optional
	MaxPods *int32 `json:"maxPods,omitempty"`

	// PodsPerCore caps pods per CPU core; the lower of this and MaxPods applies.
	//
	// +kubebuilder:validation:Minimum=0
	// +optional
	PodsPerCore *int32 `json:"podsPerCore,omitempty"`

	// SystemReserved reserves resources for OS daemons. Keys: cpu, memory, ephemeral-storage, pid.
	//
	// +kubebuilder:validation:XValidation:message="valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage', 'pid'])"
	// +kubebuilder:validation:XValidation:message="systemReserved value cannot be a negative resource quantity",rule="self.all(k, !self[k].startsWith('-'))"
	// +optional
	SystemReserved map[string]ResourceQuantityString `json:"systemReserved,omitempty"`

	// KubeReserved reserves resources for Kubernetes components. Keys: cpu, memory, ephemeral-storage, pid.
	//
	// +kubebuilder:validation:XValidation:message="valid keys for kubeReserved are ['cpu','memory','ephemeral-storage','pid']",rule="self.all(k, k in ['cpu', 'memory', 'ephemeral-storage', 'pid'])"
	// +kubebuilder:validation:XValidation:message="kubeReserved value cannot be a negative resource quantity",rule="self.all(k, !self[k].startsWith('-'))"
	// +optional
	KubeReserved map[string]ResourceQuantityString `json:"kubeReserved,omitempty"`

	// EvictionHard maps eviction signals to hard eviction thresholds.
	//
	// +kubebuilder:validation:XValidation:message="valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(k, k in ['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'imagefs.inodesFree', 'pid.available'])"
	// +optional
	EvictionHard map[string]EvictionThreshold `json:"evictionHard,omitempty"`

	// EvictionSoft maps eviction signals to soft eviction thresholds. Every key needs a grace period in
	// EvictionSoftGracePeriod.
	//
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoft are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(k, k in ['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'imagefs.inodesFree', 'pid.available'])"
	// +optional
	EvictionSoft map[string]EvictionThreshold `json:"evictionSoft,omitempty"`

	// EvictionSoftGracePeriod maps eviction signals to the grace period of their soft threshold. Every key
	// needs a threshold in EvictionSoft.
	//
	// +kubebuilder:validation:XValidation:message="valid keys for evictionSoftGracePeriod are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']",rule="self.all(k, k in ['memory.available', 'nodefs.available', 'nodefs.inodesFree', 'imagefs.available', 'imagefs.inodesFree', 'pid.available'])"
	// +optional
	EvictionSoftGracePeriod map[string]metav1.Duration `json:"evictionSoftGracePeriod,omitempty"`

	// EvictionMaxPodGracePeriod is the longest pod termination grace period, in seconds, used when a soft
	// eviction threshold is met.
	// +optional
	EvictionMaxPodGracePeriod *int32 `json:"evictionMaxPodGracePeriod,omitempty"`

	// ImageGCHighThresholdPercent is the disk usage percent above which image garbage collection always
	// runs. It must be greater than ImageGCLowThresholdPercent.
	//
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ImageGCHighThresholdPercent *int32 `json:"imageGCHighThresholdPercent,omitempty"`

	// ImageGCLowThresholdPercent is the disk usage percent below which image garbage collection never
	// runs, and down to which it collects.
	//
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	ImageGCLowThresholdPercent *int32 `json:"imageGCLowThresholdPercent,omitempty"`

	// CPUCFSQuota enables CFS quota enforcement for containers with CPU limits.
	// +optional
	CPUCFSQuota *bool `json:"cpuCFSQuota,omitempty"`
}

// ResourceQuantityString is a resource quantity in its string form (for example "100m", "1Gi", "1000").
// The schema checks the syntax; a CEL rule on the enclosing map rejects negative values.
//
// +kubebuilder:validation:Pattern=`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`
type ResourceQuantityString string

// EvictionThreshold is a kubelet eviction threshold: a percentage with up to two decimals (for example
// "10%") or a resource quantity (for example "500Mi").
//
// +kubebuilder:validation:Pattern=`^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$`
type EvictionThreshold string
