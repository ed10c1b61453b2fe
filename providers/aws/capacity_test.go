package aws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

func quantity(s string) *resource.Quantity {
	q := resource.MustParse(s)
	return &q
}

func TestCapacityAndAllocatable(t *testing.T) {
	raid0 := awsv1.InstanceStorePolicyRAID0
	m6g := func() typeInfo {
		info, _ := infoFromEC2(ec2Type("m6g.large", "arm64", 2, 8192, 3, 10), []string{"us-east-1a"})
		return info
	}
	withStore := func() typeInfo {
		info := m5Large()
		info.InstanceStoreGB = 75
		return info
	}
	c5_4xl := func() typeInfo {
		info, _ := infoFromEC2(ec2Type("c5.4xlarge", "x86_64", 16, 32768, 8, 30), []string{"us-east-1a"})
		return info
	}
	for _, tc := range []struct {
		name  string
		info  typeInfo
		shape nodeShape
		// want capacity and allocatable, as cpu, memory, pods, ephemeral-storage
		capacity, allocatable [4]string
	}{
		{
			// Karpenter's documented worked example.
			name: "m5.large AL2023 defaults", info: m5Large(), shape: nodeShape{Family: awsv1.AMIFamilyAL2023},
			capacity:    [4]string{"2", "7577Mi", "29", "20Gi"},
			allocatable: [4]string{"1930m", "6903Mi", "29", "17Gi"},
		},
		{
			name: "arm64 keeps 64Mi for the kernel", info: m6g(), shape: nodeShape{Family: awsv1.AMIFamilyAL2023},
			capacity:    [4]string{"2", "7513Mi", "29", "20Gi"},
			allocatable: [4]string{"1930m", "6839Mi", "29", "17Gi"},
		},
		{
			name: "16 vCPUs, 8 ENIs of 30 addresses", info: c5_4xl(), shape: nodeShape{Family: awsv1.AMIFamilyAL2023},
			// pods 8*29+2 = 234; cpu 60+10+5+5+12*2.5 = 110m; memory 32768-2458 = 30310, -(11*234+255)=2829, -100
			capacity:    [4]string{"16", "30310Mi", "234", "20Gi"},
			allocatable: [4]string{"15890m", "27381Mi", "234", "17Gi"},
		},
		{
			name: "maxPods caps pods but AL2023 memory overhead stays ENI-based", info: m5Large(),
			shape:       nodeShape{Family: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{MaxPods: aws.Int32(10)}},
			capacity:    [4]string{"2", "7577Mi", "10", "20Gi"},
			allocatable: [4]string{"1930m", "6903Mi", "10", "17Gi"},
		},
		{
			name: "Bottlerocket memory overhead follows maxPods", info: m5Large(),
			shape:       nodeShape{Family: awsv1.AMIFamilyBottlerocket, Kubelet: &awsv1.KubeletConfiguration{MaxPods: aws.Int32(10)}},
			capacity:    [4]string{"2", "7577Mi", "10", "20Gi"},
			allocatable: [4]string{"1930m", "7112Mi", "10", "17Gi"}, // 7577-(110+255)-100
		},
		{
			name: "podsPerCore", info: m5Large(),
			shape:       nodeShape{Family: awsv1.AMIFamilyAL2, Kubelet: &awsv1.KubeletConfiguration{PodsPerCore: aws.Int32(4)}},
			capacity:    [4]string{"2", "7577Mi", "8", "20Gi"},
			allocatable: [4]string{"1930m", "6903Mi", "8", "17Gi"},
		},
		{
			name: "podsPerCore is ignored on Bottlerocket", info: m5Large(),
			shape:       nodeShape{Family: awsv1.AMIFamilyBottlerocket, Kubelet: &awsv1.KubeletConfiguration{PodsPerCore: aws.Int32(4)}},
			capacity:    [4]string{"2", "7577Mi", "29", "20Gi"},
			allocatable: [4]string{"1930m", "6903Mi", "29", "17Gi"},
		},
		{
			name: "Windows has 110 pods and a 50Gi root volume", info: m5Large(), shape: nodeShape{Family: awsv1.AMIFamilyWindows2022},
			capacity:    [4]string{"2", "7577Mi", "110", "50Gi"},
			allocatable: [4]string{"1930m", "6012Mi", "110", "44Gi"}, // 7577-(11*110+255)-100; 50-1-5
		},
		{
			name: "reserved ENIs and an efa-only interface on card 0", info: m5Large(),
			shape: nodeShape{Family: awsv1.AMIFamilyAL2023, ReservedENIs: 1, NetworkInterfaces: []awsv1.NetworkInterface{
				{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.NetworkInterfaceTypeInterface},
				{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.NetworkInterfaceTypeEFAOnly},
			}},
			capacity:    [4]string{"2", "7577Mi", "11", "20Gi"}, // (3-1-1)*9+2
			allocatable: [4]string{"1930m", "6903Mi", "11", "17Gi"},
		},
		{
			name: "kubelet reservations and eviction thresholds replace the defaults", info: m5Large(),
			shape: nodeShape{Family: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{
				KubeReserved:   map[string]awsv1.ResourceQuantityString{"cpu": "200m", "memory": "1Gi", "pid": "100"},
				SystemReserved: map[string]awsv1.ResourceQuantityString{"memory": "100Mi", "ephemeral-storage": "2Gi"},
				EvictionHard:   map[string]awsv1.EvictionThreshold{"memory.available": "5%", "nodefs.available": "1Gi"},
			}},
			capacity: [4]string{"2", "7577Mi", "29", "20Gi"},
			// memory: 7577Mi - 1Gi - 100Mi - ceil(5% of 7577Mi); ephemeral: 20 - 1 - 2 - 1
			allocatable: [4]string{"1800m", "6369207910", "29", "16Gi"},
		},
		{
			name: "evictionHard 100% counts as no threshold", info: m5Large(),
			shape:       nodeShape{Family: awsv1.AMIFamilyAL2023, Kubelet: &awsv1.KubeletConfiguration{EvictionHard: map[string]awsv1.EvictionThreshold{"memory.available": "100%"}}},
			capacity:    [4]string{"2", "7577Mi", "29", "20Gi"},
			allocatable: [4]string{"1930m", "7003Mi", "29", "17Gi"},
		},
		{
			name: "root volume mapping sets ephemeral storage", info: m5Large(),
			shape: nodeShape{Family: awsv1.AMIFamilyAL2023, BlockDeviceMappings: []awsv1.BlockDeviceMapping{
				{DeviceName: aws.String("/dev/xvdb"), EBS: &awsv1.BlockDevice{VolumeSize: quantity("100Gi")}, RootVolume: true},
			}},
			capacity:    [4]string{"2", "7577Mi", "29", "100Gi"},
			allocatable: [4]string{"1930m", "6903Mi", "29", "89Gi"},
		},
		{
			name: "Bottlerocket data volume is /dev/xvdb", info: m5Large(),
			shape: nodeShape{Family: awsv1.AMIFamilyBottlerocket, BlockDeviceMappings: []awsv1.BlockDeviceMapping{
				{DeviceName: aws.String("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: quantity("4Gi")}},
				{DeviceName: aws.String("/dev/xvdb"), EBS: &awsv1.BlockDevice{VolumeSize: quantity("50Gi")}},
			}},
			capacity:    [4]string{"2", "7577Mi", "29", "50Gi"},
			allocatable: [4]string{"1930m", "6903Mi", "29", "44Gi"},
		},
		{
			name: "Custom takes the last mapping", info: m5Large(),
			shape: nodeShape{Family: awsv1.AMIFamilyCustom, BlockDeviceMappings: []awsv1.BlockDeviceMapping{
				{DeviceName: aws.String("/dev/xvda"), EBS: &awsv1.BlockDevice{VolumeSize: quantity("10Gi")}},
				{DeviceName: aws.String("/dev/xvdc"), EBS: &awsv1.BlockDevice{VolumeSize: quantity("30Gi")}},
			}},
			capacity:    [4]string{"2", "7577Mi", "29", "30Gi"},
			allocatable: [4]string{"1930m", "6903Mi", "29", "26Gi"},
		},
		{
			name: "RAID0 uses the instance store", info: withStore(),
			shape:       nodeShape{Family: awsv1.AMIFamilyAL2023, InstanceStorePolicy: &raid0},
			capacity:    [4]string{"2", "7577Mi", "29", "75G"},
			allocatable: [4]string{"1930m", "6903Mi", "29", "66426258176"}, // 75e9 - 1Gi - 7.5e9
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.shape.VMMemoryOverheadPercent == 0 {
				tc.shape.VMMemoryOverheadPercent = DefaultVMMemoryOverheadPercent
			}
			c := tc.shape.capacity(&tc.info)
			o, err := tc.shape.overhead(&tc.info, c)
			if err != nil {
				t.Fatal(err)
			}
			it := &cloudprovider.InstanceType{Capacity: c, Overhead: o}
			names := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage}
			for i, n := range names {
				if got, want := c[n], resource.MustParse(tc.capacity[i]); got.Cmp(want) != 0 {
					t.Errorf("capacity %s = %s, want %s", n, got.String(), want.String())
				}
				if got, want := it.Allocatable()[n], resource.MustParse(tc.allocatable[i]); got.Cmp(want) != 0 {
					t.Errorf("allocatable %s = %s (%d), want %s", n, got.String(), got.Value(), want.String())
				}
			}
		})
	}
}

func TestOverheadRejectsBadKubeletValues(t *testing.T) {
	info := m5Large()
	for _, k := range []*awsv1.KubeletConfiguration{
		{KubeReserved: map[string]awsv1.ResourceQuantityString{"memory": "lots"}},
		{EvictionHard: map[string]awsv1.EvictionThreshold{"memory.available": "120%"}},
	} {
		s := nodeShape{Family: awsv1.AMIFamilyAL2023, Kubelet: k, VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent}
		if _, err := s.overhead(&info, s.capacity(&info)); err == nil {
			t.Errorf("overhead(%+v) succeeded, want an error naming the field", k)
		}
	}
}

func TestGPUAndAcceleratorCapacity(t *testing.T) {
	info := m5Large()
	info.GPUCount, info.GPUManufacturer = 4, "NVIDIA"
	info.NeuronDevices, info.NeuronCores = 2, 4
	info.EFAInterfaces = 1
	s := nodeShape{Family: awsv1.AMIFamilyAL2023, VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent}
	c := s.capacity(&info)
	for name, want := range map[corev1.ResourceName]int64{awsv1.ResourceNVIDIAGPU: 4, awsv1.ResourceAWSNeuron: 2, awsv1.ResourceAWSNeuronCore: 4, awsv1.ResourceEFA: 1} {
		if q := c[name]; q.Value() != want {
			t.Errorf("%s = %s, want %d", name, q.String(), want)
		}
	}
}
