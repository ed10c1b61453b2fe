package v1

import (
	"regexp"

	corev1 "k8s.io/api/core/v1"
)

// Well-known node labels that the AWS provider sets on nodes from the instance type it launches.
// Most can also be used in NodePool requirements.
const (
	// LabelInstanceCategory is the first letters of the instance family (for example "m" for m5.large).
	LabelInstanceCategory = Group + "/instance-category"
	// LabelInstanceFamily is the instance family (for example "m5").
	LabelInstanceFamily = Group + "/instance-family"
	// LabelInstanceGeneration is the generation number of the instance family (for example "5").
	LabelInstanceGeneration = Group + "/instance-generation"
	// LabelInstanceSize is the size part of the instance type name (for example "large").
	LabelInstanceSize = Group + "/instance-size"
	// LabelInstanceCPU is the number of vCPUs.
	LabelInstanceCPU = Group + "/instance-cpu"
	// LabelInstanceCPUManufacturer is the CPU manufacturer (for example "intel", "amd", "aws").
	LabelInstanceCPUManufacturer = Group + "/instance-cpu-manufacturer"
	// LabelInstanceCPUSustainedClockSpeedMhz is the sustained CPU clock speed in MHz.
	LabelInstanceCPUSustainedClockSpeedMhz = Group + "/instance-cpu-sustained-clock-speed-mhz"
	// LabelInstanceMemory is the instance memory in MiB.
	LabelInstanceMemory = Group + "/instance-memory"
	// LabelInstanceEBSBandwidth is the maximum EBS bandwidth in Mbps.
	LabelInstanceEBSBandwidth = Group + "/instance-ebs-bandwidth"
	// LabelInstanceNetworkBandwidth is the baseline network bandwidth in Mbps.
	LabelInstanceNetworkBandwidth = Group + "/instance-network-bandwidth"
	// LabelInstanceGPUName is the lower-case name of the instance's GPU.
	LabelInstanceGPUName = Group + "/instance-gpu-name"
	// LabelInstanceGPUManufacturer is the lower-case manufacturer of the instance's GPU.
	LabelInstanceGPUManufacturer = Group + "/instance-gpu-manufacturer"
	// LabelInstanceGPUCount is the number of GPUs.
	LabelInstanceGPUCount = Group + "/instance-gpu-count"
	// LabelInstanceGPUMemory is the memory of one GPU in MiB.
	LabelInstanceGPUMemory = Group + "/instance-gpu-memory"
	// LabelInstanceAcceleratorName is the lower-case name of the instance's inference accelerator.
	LabelInstanceAcceleratorName = Group + "/instance-accelerator-name"
	// LabelInstanceAcceleratorManufacturer is the lower-case manufacturer of the inference accelerator.
	LabelInstanceAcceleratorManufacturer = Group + "/instance-accelerator-manufacturer"
	// LabelInstanceAcceleratorCount is the number of inference accelerators.
	LabelInstanceAcceleratorCount = Group + "/instance-accelerator-count"
	// LabelInstanceLocalNVME is the total local NVMe instance-store size in GB.
	LabelInstanceLocalNVME = Group + "/instance-local-nvme"
	// LabelInstanceHypervisor is the hypervisor of the instance type ("nitro", "xen", or empty for metal).
	LabelInstanceHypervisor = Group + "/instance-hypervisor"
	// LabelInstanceEncryptionInTransitSupported tells whether the instance type supports encryption in transit.
	LabelInstanceEncryptionInTransitSupported = Group + "/instance-encryption-in-transit-supported"
	// LabelInstanceCapabilityFlex tells whether the instance type is a flex instance type.
	LabelInstanceCapabilityFlex = Group + "/instance-capability-flex"
	// LabelInstanceTenancy is the tenancy of the instance ("default" or "dedicated").
	LabelInstanceTenancy = Group + "/instance-tenancy"
	// LabelCapacityReservationID is the ID of the capacity reservation the instance was launched into.
	LabelCapacityReservationID = Group + "/capacity-reservation-id"
	// LabelCapacityReservationType is the type of that capacity reservation ("default" or "capacity-block").
	LabelCapacityReservationType = Group + "/capacity-reservation-type"
	// LabelCapacityReservationInterruptible tells whether that capacity reservation is interruptible.
	LabelCapacityReservationInterruptible = Group + "/capacity-reservation-interruptible"
	// LabelPlacementGroupID is the ID of the placement group the instance was launched into.
	LabelPlacementGroupID = Group + "/placement-group-id"
	// LabelPlacementGroupPartition is the partition number within a partition placement group.
	LabelPlacementGroupPartition = Group + "/placement-group-partition"
	// LabelNodeClass is the name of the EC2NodeClass a node was launched from. It is also a launch tag.
	LabelNodeClass = Group + "/ec2nodeclass"
	// LabelTopologyZoneID is the ID (not the name) of the availability zone of the node.
	LabelTopologyZoneID = "topology.k8s.aws/zone-id"
)

// Annotations the AWS provider writes on EC2NodeClasses and NodeClaims.
const (
	// AnnotationEC2NodeClassHash holds the static drift hash of an EC2NodeClass spec.
	AnnotationEC2NodeClassHash = Group + "/ec2nodeclass-hash"
	// AnnotationEC2NodeClassHashVersion holds the version of the hash algorithm behind AnnotationEC2NodeClassHash.
	AnnotationEC2NodeClassHashVersion = Group + "/ec2nodeclass-hash-version"
	// AnnotationClaimTagged marks a NodeClaim whose instance has received its post-registration tags.
	AnnotationClaimTagged = Group + "/tagged"
	// AnnotationInstanceProfile holds the name of the instance profile managed for an EC2NodeClass with spec.role.
	AnnotationInstanceProfile = Group + "/instance-profile-name"
)

// EC2NodeClassHashVersion is the version of the EC2NodeClass drift hash algorithm at v1.14.1. A change of
// version re-stamps NodeClaims instead of drifting them.
const EC2NodeClassHashVersion = "v5"

// TerminationFinalizer is the finalizer on an EC2NodeClass that lets the provider delete its launch
// templates and managed instance profile before the object goes away.
const TerminationFinalizer = Group + "/termination"

// Tag keys the provider puts on the EC2 resources it creates. Users may not set them in spec.tags.
const (
	// TagEKSClusterName carries the cluster name on launched resources.
	TagEKSClusterName = "eks:eks-cluster-name"
	// TagKubernetesClusterPrefix is followed by the cluster name; its value is "owned".
	TagKubernetesClusterPrefix = "kubernetes.io/cluster/"
	// TagNodePool carries the name of the NodePool an instance belongs to.
	TagNodePool = "karpenter.sh/nodepool"
	// TagNodeClaim carries the name of the NodeClaim an instance belongs to; added after registration.
	TagNodeClaim = "karpenter.sh/nodeclaim"
	// TagNodeClass carries the name of the EC2NodeClass an instance was launched from.
	TagNodeClass = LabelNodeClass
	// TagName is the EC2 Name tag, set to the node name after registration.
	TagName = "Name"
)

// RestrictedTagPatterns match the tag keys that spec.tags may not use, because the provider sets them
// itself. They mirror the tag rules of the CRD and are used to check tags that did not pass through it.
var RestrictedTagPatterns = []*regexp.Regexp{
	regexp.MustCompile(`^` + regexp.QuoteMeta(TagEKSClusterName) + `$`),
	regexp.MustCompile(`^` + regexp.QuoteMeta(TagKubernetesClusterPrefix)),
	regexp.MustCompile(`^` + regexp.QuoteMeta(TagNodePool) + `$`),
	regexp.MustCompile(`^` + regexp.QuoteMeta(TagNodeClaim) + `$`),
	regexp.MustCompile(`^` + regexp.QuoteMeta(TagNodeClass) + `$`),
}

// Extended resources that nodes launched by the AWS provider may advertise.
const (
	// ResourceAWSPodENI is the number of branch interfaces for security groups for pods.
	ResourceAWSPodENI corev1.ResourceName = "vpc.amazonaws.com/pod-eni"
	// ResourceEFA is the number of Elastic Fabric Adapter interfaces.
	ResourceEFA corev1.ResourceName = "vpc.amazonaws.com/efa"
	// ResourcePrivateIPv4Address is the number of secondary IPv4 addresses (Windows nodes).
	ResourcePrivateIPv4Address corev1.ResourceName = "vpc.amazonaws.com/PrivateIPv4Address"
	// ResourceNVIDIAGPU is the number of NVIDIA GPUs.
	ResourceNVIDIAGPU corev1.ResourceName = "nvidia.com/gpu"
	// ResourceAMDGPU is the number of AMD GPUs.
	ResourceAMDGPU corev1.ResourceName = "amd.com/gpu"
	// ResourceAWSNeuron is the number of AWS Neuron devices.
	ResourceAWSNeuron corev1.ResourceName = "aws.amazon.com/neuron"
	// ResourceAWSNeuronCore is the number of AWS Neuron cores.
	ResourceAWSNeuronCore corev1.ResourceName = "aws.amazon.com/neuroncore"
	// ResourceHabanaGaudi is the number of Habana Gaudi accelerators.
	ResourceHabanaGaudi corev1.ResourceName = "habana.ai/gaudi"
)
