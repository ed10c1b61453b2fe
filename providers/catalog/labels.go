package catalog

import (
	"strconv"
	"strings"
)

// Well-known node label keys. They are defined here so that the catalog has
// no dependency on the API packages; the values are the ones Kubernetes and
// Karpenter's AWS provider use.
const (
	// LabelInstanceType is the Kubernetes instance-type label.
	LabelInstanceType = "node.kubernetes.io/instance-type"
	// LabelArch is the Kubernetes architecture label (amd64, arm64).
	LabelArch = "kubernetes.io/arch"
	// LabelOS is the Kubernetes operating-system label.
	LabelOS = "kubernetes.io/os"
	// LabelZone is the Kubernetes zone label.
	LabelZone = "topology.kubernetes.io/zone"
	// LabelRegion is the Kubernetes region label.
	LabelRegion = "topology.kubernetes.io/region"
	// LabelCapacityType is Karpenter's capacity-type label (on-demand, spot).
	LabelCapacityType = "karpenter.sh/capacity-type"
	// LabelZoneID is the AWS zone-ID label.
	LabelZoneID = "topology.k8s.aws/zone-id"

	// LabelInstanceCategory is the category, e.g. "m".
	LabelInstanceCategory = "karpenter.k8s.aws/instance-category"
	// LabelInstanceFamily is the family, e.g. "m5".
	LabelInstanceFamily = "karpenter.k8s.aws/instance-family"
	// LabelInstanceGeneration is the generation, e.g. "5".
	LabelInstanceGeneration = "karpenter.k8s.aws/instance-generation"
	// LabelInstanceSize is the size, e.g. "large".
	LabelInstanceSize = "karpenter.k8s.aws/instance-size"
	// LabelInstanceCPU is the vCPU count.
	LabelInstanceCPU = "karpenter.k8s.aws/instance-cpu"
	// LabelInstanceMemory is the memory in MiB.
	LabelInstanceMemory = "karpenter.k8s.aws/instance-memory"
	// LabelInstanceGPUName is the lower-case, dash-separated GPU model, e.g. "a10g".
	LabelInstanceGPUName = "karpenter.k8s.aws/instance-gpu-name"
	// LabelInstanceGPUManufacturer is the lower-case GPU vendor, e.g. "nvidia".
	LabelInstanceGPUManufacturer = "karpenter.k8s.aws/instance-gpu-manufacturer"
	// LabelInstanceGPUCount is the number of GPUs.
	LabelInstanceGPUCount = "karpenter.k8s.aws/instance-gpu-count"
	// LabelInstanceGPUMemory is the memory of one GPU in MiB.
	LabelInstanceGPUMemory = "karpenter.k8s.aws/instance-gpu-memory"
	// LabelInstanceHypervisor is the hypervisor, e.g. "nitro".
	LabelInstanceHypervisor = "karpenter.k8s.aws/instance-hypervisor"
	// LabelInstanceLocalNVMe is the local NVMe storage in GB.
	LabelInstanceLocalNVMe = "karpenter.k8s.aws/instance-local-nvme"
	// LabelInstanceNetworkBandwidth is the baseline network bandwidth in Mbps.
	LabelInstanceNetworkBandwidth = "karpenter.k8s.aws/instance-network-bandwidth"
)

// OSLinux is the only operating system the catalog prices.
const OSLinux = "linux"

// Labels returns the well-known node labels a node of this type carries,
// independent of zone and capacity type (see Offering.Labels for those):
// instance type, arch (the first architecture), os=linux, and the
// karpenter.k8s.aws/instance-* keys. Keys without a meaningful value are
// left out: the GPU keys for types without GPUs, hypervisor for bare metal,
// local-nvme for types without NVMe instance storage, and network-bandwidth
// when unknown. The map is new on every call.
func (t InstanceType) Labels() map[string]string {
	l := map[string]string{
		LabelInstanceType:       t.Name,
		LabelOS:                 OSLinux,
		LabelInstanceCategory:   t.Category,
		LabelInstanceFamily:     t.Family,
		LabelInstanceGeneration: strconv.Itoa(t.Generation),
		LabelInstanceSize:       t.Size,
		LabelInstanceCPU:        strconv.Itoa(t.VCPU),
		LabelInstanceMemory:     strconv.FormatInt(t.MemoryMiB, 10),
	}
	if len(t.Architectures) > 0 {
		l[LabelArch] = t.Architectures[0]
	}
	if t.GPUCount > 0 {
		l[LabelInstanceGPUName] = labelValue(t.GPUName)
		l[LabelInstanceGPUManufacturer] = labelValue(t.GPUManufacturer)
		l[LabelInstanceGPUCount] = strconv.Itoa(t.GPUCount)
		l[LabelInstanceGPUMemory] = strconv.FormatInt(t.GPUMemoryMiB, 10)
	}
	if t.Hypervisor != "" {
		l[LabelInstanceHypervisor] = t.Hypervisor
	}
	if t.LocalNVMeGB > 0 {
		l[LabelInstanceLocalNVMe] = strconv.FormatInt(t.LocalNVMeGB, 10)
	}
	if t.NetworkBandwidthMbps > 0 {
		l[LabelInstanceNetworkBandwidth] = strconv.FormatInt(t.NetworkBandwidthMbps, 10)
	}
	return l
}

// Labels returns the labels that depend on where and how the node was
// bought: region, zone, zone ID (when known) and capacity type.
func (o Offering) Labels() map[string]string {
	l := map[string]string{
		LabelRegion:       o.Region,
		LabelZone:         o.Zone,
		LabelCapacityType: o.CapacityType,
	}
	if o.ZoneID != "" {
		l[LabelZoneID] = o.ZoneID
	}
	return l
}

// labelValue turns a vendor string into a label value: lower case, runs of
// spaces replaced by one dash ("Radeon Pro V520" -> "radeon-pro-v520").
func labelValue(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), "-")
}
