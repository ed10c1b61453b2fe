package aws

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// Defaults of the node model, as Karpenter documents them.
const (
	// DefaultVMMemoryOverheadPercent is the share of memory the hypervisor keeps.
	DefaultVMMemoryOverheadPercent = cloudprovider.DefaultVMMemoryOverheadPercent
	// windowsMaxPods is the pod density of Windows nodes.
	windowsMaxPods = 110
	// defaultEphemeralGi is the root volume of Linux families; windowsEphemeralGi of Windows.
	defaultEphemeralGi = 20
	windowsEphemeralGi = 50
	mi                 = int64(1) << 20
	gi                 = int64(1) << 30
)

// nodeShape is what of an EC2NodeClass (and the provider's options) shapes a node's capacity and
// overhead.
type nodeShape struct {
	Family              string
	Kubelet             *awsv1.KubeletConfiguration
	BlockDeviceMappings []awsv1.BlockDeviceMapping
	InstanceStorePolicy *awsv1.InstanceStorePolicy
	NetworkInterfaces   []awsv1.NetworkInterface
	// VMMemoryOverheadPercent is the share of memory taken off for the hypervisor.
	VMMemoryOverheadPercent float64
	// ReservedENIs are network interfaces kept out of the pod-density formula.
	ReservedENIs int
}

func isWindows(family string) bool { return strings.HasPrefix(family, "Windows") }

// osOf returns the kubernetes.io/os value of nodes of the AMI family.
func osOf(family string) string {
	if isWindows(family) {
		return "windows"
	}
	return karpv1.OSLinux
}

// eniLimitedPods is the pod density of the AWS VPC CNI without prefix delegation: every ENI but
// the reserved ones brings its addresses less its own, plus 2 host-network pods.
func eniLimitedPods(enis, ipv4PerENI, reserved int) int {
	return max(enis-reserved, 0)*(ipv4PerENI-1) + 2
}

// efaOnlyOnCard0 counts the efa-only interfaces on network card 0, which take ENI slots.
func (s *nodeShape) efaOnlyOnCard0() int {
	n := 0
	for _, ni := range s.NetworkInterfaces {
		if ni.NetworkCardIndex == 0 && ni.InterfaceType == awsv1.NetworkInterfaceTypeEFAOnly {
			n++
		}
	}
	return n
}

// usesENILimitedDensity reports whether the family derives pod density from the ENI limits.
func (s *nodeShape) usesENILimitedDensity() bool { return !isWindows(s.Family) }

// pods returns the node's pod capacity: kubelet maxPods when set; else the ENI-limited density
// (110 on Windows or when the type's ENI limits are unknown); capped by podsPerCore × vCPUs
// except on Bottlerocket.
func (s *nodeShape) pods(t *typeInfo) int64 {
	var pods int64
	switch {
	case s.Kubelet != nil && s.Kubelet.MaxPods != nil:
		pods = int64(*s.Kubelet.MaxPods)
	case s.usesENILimitedDensity() && t.MaxENIs > 0 && t.IPv4PerENI > 0:
		pods = int64(eniLimitedPods(t.MaxENIs, t.IPv4PerENI, s.ReservedENIs+s.efaOnlyOnCard0()))
	default:
		pods = windowsMaxPods
	}
	if s.Kubelet != nil && s.Kubelet.PodsPerCore != nil && *s.Kubelet.PodsPerCore > 0 && s.Family != awsv1.AMIFamilyBottlerocket {
		pods = min(pods, int64(*s.Kubelet.PodsPerCore)*int64(t.VCPU))
	}
	return pods
}

// memoryOverheadPods is the pod count in the kube-reserved memory formula: the ENI-limited
// density without reserved ENIs for AL2, AL2023 and Custom, the pod capacity otherwise.
func (s *nodeShape) memoryOverheadPods(t *typeInfo, pods int64) int64 {
	switch s.Family {
	case awsv1.AMIFamilyAL2, awsv1.AMIFamilyAL2023, awsv1.AMIFamilyCustom:
		if t.MaxENIs > 0 && t.IPv4PerENI > 0 {
			return int64(eniLimitedPods(t.MaxENIs, t.IPv4PerENI, 0))
		}
	}
	return pods
}

// ephemeralDevice returns the device that holds the kubelet's root directory for the family.
func ephemeralDevice(family string) string {
	switch {
	case family == awsv1.AMIFamilyBottlerocket:
		return "/dev/xvdb"
	case isWindows(family):
		return "/dev/sda1"
	}
	return "/dev/xvda"
}

// volumeBytes returns the size of an EBS mapping, or false without one.
func volumeBytes(b awsv1.BlockDeviceMapping) (int64, bool) {
	if b.EBS == nil || b.EBS.VolumeSize == nil {
		return 0, false
	}
	return b.EBS.VolumeSize.Value(), true
}

// ephemeralStorage returns the node's ephemeral-storage capacity in bytes: the instance store
// with RAID0; else the root-volume mapping; else the family's kubelet device among the mappings
// (the last mapping for Custom); else the family default (20Gi, 50Gi on Windows).
func (s *nodeShape) ephemeralStorage(t *typeInfo) int64 {
	if s.InstanceStorePolicy != nil && *s.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0 && t.InstanceStoreGB > 0 {
		return t.InstanceStoreGB * 1000 * 1000 * 1000
	}
	for _, b := range s.BlockDeviceMappings {
		if b.RootVolume {
			if n, ok := volumeBytes(b); ok {
				return n
			}
		}
	}
	if s.Family == awsv1.AMIFamilyCustom {
		if n := len(s.BlockDeviceMappings); n > 0 {
			if v, ok := volumeBytes(s.BlockDeviceMappings[n-1]); ok {
				return v
			}
		}
	} else {
		dev := ephemeralDevice(s.Family)
		for _, b := range s.BlockDeviceMappings {
			if b.DeviceName != nil && *b.DeviceName == dev {
				if n, ok := volumeBytes(b); ok {
					return n
				}
			}
		}
	}
	if isWindows(s.Family) {
		return windowsEphemeralGi * gi
	}
	return defaultEphemeralGi * gi
}

// capacity returns the full capacity of a node of the type.
func (s *nodeShape) capacity(t *typeInfo) corev1.ResourceList {
	memMiB := cloudprovider.NodeMemoryMiB(t.MemoryMiB, s.VMMemoryOverheadPercent, t.Architectures)
	c := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(t.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memMiB*mi, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(s.pods(t), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(s.ephemeralStorage(t), resource.BinarySI),
	}
	count := func(name corev1.ResourceName, n int) {
		if n > 0 {
			c[name] = *resource.NewQuantity(int64(n), resource.DecimalSI)
		}
	}
	if t.GPUCount > 0 {
		switch strings.ToLower(t.GPUManufacturer) {
		case "nvidia":
			count(awsv1.ResourceNVIDIAGPU, t.GPUCount)
		case "amd":
			count(awsv1.ResourceAMDGPU, t.GPUCount)
		case "habana":
			count(awsv1.ResourceHabanaGaudi, t.GPUCount)
		}
	}
	count(awsv1.ResourceAWSNeuron, t.NeuronDevices)
	count(awsv1.ResourceAWSNeuronCore, t.NeuronCores)
	efa := t.EFAInterfaces
	if len(s.NetworkInterfaces) > 0 {
		efa = 0
		for _, ni := range s.NetworkInterfaces {
			if ni.InterfaceType == awsv1.NetworkInterfaceTypeEFAOnly {
				efa++
			}
		}
	}
	count(awsv1.ResourceEFA, efa)
	return c
}

// overhead returns the reservations of a node of the type whose capacity is c: kube-reserved
// (cpu by cloudprovider.KubeReservedMilliCPU, memory 11 MiB per pod plus 255 MiB, 1Gi ephemeral
// storage, each replaced by kubelet.kubeReserved), kubelet.systemReserved, and evictionHard
// (memory.available 100Mi and nodefs.available 10%, each replaced by the kubelet's value).
func (s *nodeShape) overhead(t *typeInfo, c corev1.ResourceList) (cloudprovider.Overhead, error) {
	pods := c[corev1.ResourcePods]
	kube := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewMilliQuantity(cloudprovider.KubeReservedMilliCPU(t.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity((11*s.memoryOverheadPods(t, pods.Value())+255)*mi, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(1*gi, resource.BinarySI),
	}
	system := corev1.ResourceList{}
	storage := c[corev1.ResourceEphemeralStorage]
	memory := c[corev1.ResourceMemory]
	eviction := corev1.ResourceList{
		corev1.ResourceMemory:           *resource.NewQuantity(100*mi, resource.BinarySI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(ceilDiv(storage.Value()*10, 100), resource.BinarySI),
	}
	if k := s.Kubelet; k != nil {
		if err := applyReserved(kube, k.KubeReserved, "kubeReserved"); err != nil {
			return cloudprovider.Overhead{}, err
		}
		if err := applyReserved(system, k.SystemReserved, "systemReserved"); err != nil {
			return cloudprovider.Overhead{}, err
		}
		for signal, res := range map[string]corev1.ResourceName{"memory.available": corev1.ResourceMemory, "nodefs.available": corev1.ResourceEphemeralStorage} {
			v, ok := k.EvictionHard[signal]
			if !ok {
				continue
			}
			total := memory
			if res == corev1.ResourceEphemeralStorage {
				total = storage
			}
			q, err := evictionQuantity(string(v), total)
			if err != nil {
				return cloudprovider.Overhead{}, fmt.Errorf("spec.kubelet.evictionHard[%s]: %w", signal, err)
			}
			eviction[res] = q
		}
	}
	return cloudprovider.Overhead{KubeReserved: kube, SystemReserved: system, EvictionThreshold: eviction}, nil
}

// applyReserved sets the cpu, memory and ephemeral-storage entries of a kubelet reservation map
// (pid is not a node resource and is ignored).
func applyReserved(into corev1.ResourceList, m map[string]awsv1.ResourceQuantityString, field string) error {
	for k, v := range m {
		name := corev1.ResourceName(k)
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory && name != corev1.ResourceEphemeralStorage {
			continue
		}
		q, err := resource.ParseQuantity(string(v))
		if err != nil {
			return fmt.Errorf("spec.kubelet.%s[%s]: %q is not a quantity: %w", field, k, v, err)
		}
		into[name] = q
	}
	return nil
}

// evictionQuantity turns an eviction threshold ("10%" of total, or a quantity) into a quantity.
// 100% means no threshold: the kubelet would evict everything, so it counts as 0.
func evictionQuantity(v string, total resource.Quantity) (resource.Quantity, error) {
	if p, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f < 0 || f > 100 {
			return resource.Quantity{}, fmt.Errorf("%q is not a percentage between 0 and 100", v)
		}
		if f == 100 {
			return *resource.NewQuantity(0, resource.BinarySI), nil
		}
		return *resource.NewQuantity(int64(math.Ceil(float64(total.Value())*f/100)), resource.BinarySI), nil
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is neither a percentage nor a quantity: %w", v, err)
	}
	return q, nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
