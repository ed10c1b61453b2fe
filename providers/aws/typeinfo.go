package aws

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/providers/catalog"
)

// typeInfo is what the provider knows about an instance type: the catalog's record (the same
// shape whether it came from DescribeInstanceTypes or the embedded catalog, so the labels are
// the catalog's) plus what only DescribeInstanceTypes reports. Offerings of the embedded record
// are not used; zones are in Zones.
type typeInfo struct {
	catalog.InstanceType
	// Zones are the zones the type is offered in, sorted.
	Zones []string
	// EBSBandwidthMbps is the maximum EBS bandwidth (0 when unknown).
	EBSBandwidthMbps int64
	// ClockSpeedMHz is the sustained clock speed (0 when unknown).
	ClockSpeedMHz int64
	// EncryptionInTransit is nil when unknown.
	EncryptionInTransit *bool
	// EFAInterfaces is the maximum number of EFA interfaces.
	EFAInterfaces int
	// InstanceStoreGB is the total instance-store size, for instanceStorePolicy RAID0.
	InstanceStoreGB int64
	// Neuron devices and cores.
	NeuronDevices, NeuronCores int
	// Inference accelerators.
	AcceleratorName, AcceleratorManufacturer string
	AcceleratorCount                         int
	// NestedVirtualization reports support for nested virtualization.
	NestedVirtualization bool
}

// kubeArch maps EC2 architectures to Kubernetes ones; others (i386, *_mac) are dropped.
var kubeArch = map[ec2types.ArchitectureType]string{
	ec2types.ArchitectureTypeX8664: karpv1.ArchitectureAmd64,
	ec2types.ArchitectureTypeArm64: karpv1.ArchitectureArm64,
}

// splitFamily splits "c7i-flex.2xlarge" into category "c", family "c7i-flex", generation 7 and
// size "2xlarge": the category is the letters before the first digit, the generation the digits
// that follow (0 when there are none).
func splitFamily(name string) (category, family string, generation int, size string) {
	family, size, _ = strings.Cut(name, ".")
	i := strings.IndexFunc(family, unicode.IsDigit)
	if i < 0 {
		return strings.TrimRight(family, "-"), family, 0, size
	}
	category = strings.TrimRight(family[:i], "-")
	j := i
	for j < len(family) && unicode.IsDigit(rune(family[j])) {
		j++
	}
	generation, _ = strconv.Atoi(family[i:j])
	return category, family, generation, size
}

// infoFromEC2 converts a DescribeInstanceTypes record. It returns false for types the provider
// cannot run nodes on (no amd64 or arm64 architecture, or no vCPU or memory figure).
func infoFromEC2(t ec2types.InstanceTypeInfo, zones []string) (typeInfo, bool) {
	name := string(t.InstanceType)
	var archs []string
	if t.ProcessorInfo != nil {
		for _, a := range t.ProcessorInfo.SupportedArchitectures {
			if k, ok := kubeArch[a]; ok && !slices.Contains(archs, k) {
				archs = append(archs, k)
			}
		}
	}
	if len(archs) == 0 || t.VCpuInfo == nil || t.MemoryInfo == nil {
		return typeInfo{}, false
	}
	category, family, generation, size := splitFamily(name)
	info := typeInfo{
		InstanceType: catalog.InstanceType{
			Name:          name,
			Category:      category,
			Family:        family,
			Generation:    generation,
			Size:          size,
			Architectures: archs,
			VCPU:          int(aws.ToInt32(t.VCpuInfo.DefaultVCpus)),
			MemoryMiB:     aws.ToInt64(t.MemoryInfo.SizeInMiB),
			Hypervisor:    string(t.Hypervisor),
			BareMetal:     aws.ToBool(t.BareMetal),
			SpotSupported: slices.Contains(t.SupportedUsageClasses, ec2types.UsageClassTypeSpot),
		},
		Zones: slices.Sorted(slices.Values(zones)),
	}
	if p := t.ProcessorInfo; p != nil {
		info.CPUManufacturer = aws.ToString(p.Manufacturer)
		if p.SustainedClockSpeedInGhz != nil {
			info.ClockSpeedMHz = int64(math.Round(*p.SustainedClockSpeedInGhz * 1000))
		}
		info.NestedVirtualization = slices.Contains(p.SupportedFeatures, ec2types.SupportedAdditionalProcessorFeature("nested-virtualization"))
	}
	if n := t.NetworkInfo; n != nil {
		info.IPv4PerENI = int(aws.ToInt32(n.Ipv4AddressesPerInterface))
		info.MaxENIs = int(aws.ToInt32(n.MaximumNetworkInterfaces))
		card := aws.ToInt32(n.DefaultNetworkCardIndex)
		for _, c := range n.NetworkCards {
			if aws.ToInt32(c.NetworkCardIndex) != card {
				continue
			}
			if c.MaximumNetworkInterfaces != nil {
				info.MaxENIs = int(*c.MaximumNetworkInterfaces)
			}
			if c.BaselineBandwidthInGbps != nil {
				info.NetworkBandwidthMbps = int64(math.Round(*c.BaselineBandwidthInGbps * 1000))
			}
		}
		if n.EfaInfo != nil {
			info.EFAInterfaces = int(aws.ToInt32(n.EfaInfo.MaximumEfaInterfaces))
		}
		info.EncryptionInTransit = n.EncryptionInTransitSupported
		if info.MaxENIs > 0 && info.IPv4PerENI > 0 {
			info.MaxPods = eniLimitedPods(info.MaxENIs, info.IPv4PerENI, 0)
		}
	}
	if e := t.EbsInfo; e != nil && e.EbsOptimizedInfo != nil {
		info.EBSBandwidthMbps = int64(aws.ToInt32(e.EbsOptimizedInfo.MaximumBandwidthInMbps))
	}
	if s := t.InstanceStorageInfo; s != nil {
		info.InstanceStoreGB = aws.ToInt64(s.TotalSizeInGB)
		if s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported {
			info.LocalNVMeGB = info.InstanceStoreGB
		}
	}
	if g := t.GpuInfo; g != nil && len(g.Gpus) > 0 {
		for _, d := range g.Gpus {
			info.GPUCount += int(aws.ToInt32(d.Count))
		}
		first := g.Gpus[0]
		info.GPUName, info.GPUManufacturer = aws.ToString(first.Name), aws.ToString(first.Manufacturer)
		if first.MemoryInfo != nil {
			info.GPUMemoryMiB = int64(aws.ToInt32(first.MemoryInfo.SizeInMiB))
		}
	}
	if a := t.InferenceAcceleratorInfo; a != nil && len(a.Accelerators) > 0 {
		for _, d := range a.Accelerators {
			info.AcceleratorCount += int(aws.ToInt32(d.Count))
		}
		info.AcceleratorName, info.AcceleratorManufacturer = aws.ToString(a.Accelerators[0].Name), aws.ToString(a.Accelerators[0].Manufacturer)
	}
	if ni := t.NeuronInfo; ni != nil {
		for _, d := range ni.NeuronDevices {
			n := int(aws.ToInt32(d.Count))
			info.NeuronDevices += n
			if d.CoreInfo != nil {
				info.NeuronCores += n * int(aws.ToInt32(d.CoreInfo.Count))
			}
		}
	}
	return info, true
}

// infoFromCatalog wraps an embedded catalog record (the offline fallback).
func infoFromCatalog(t catalog.InstanceType) typeInfo {
	info := typeInfo{InstanceType: t}
	for _, o := range t.Offerings {
		if !slices.Contains(info.Zones, o.Zone) {
			info.Zones = append(info.Zones, o.Zone)
		}
	}
	slices.Sort(info.Zones)
	info.Offerings = nil
	return info
}

// optionalLabelKeys are the labels only some instance types carry; a type without one gets a
// DoesNotExist requirement, so that a NodeClaim requiring, say, a GPU name excludes it.
var optionalLabelKeys = []string{
	awsv1.LabelInstanceGPUName, awsv1.LabelInstanceGPUManufacturer, awsv1.LabelInstanceGPUCount, awsv1.LabelInstanceGPUMemory,
	awsv1.LabelInstanceAcceleratorName, awsv1.LabelInstanceAcceleratorManufacturer, awsv1.LabelInstanceAcceleratorCount,
	awsv1.LabelInstanceHypervisor, awsv1.LabelInstanceLocalNVME, awsv1.LabelInstanceNetworkBandwidth,
	awsv1.LabelInstanceEBSBandwidth, awsv1.LabelInstanceCPUManufacturer, awsv1.LabelInstanceCPUSustainedClockSpeedMhz,
	awsv1.LabelInstanceEncryptionInTransitSupported,
}

// labels returns the zone-independent node labels of the type: the catalog's (instance type,
// arch, os, karpenter.k8s.aws/instance-*) plus the ones only DescribeInstanceTypes knows, with
// os set for the AMI family.
func (t *typeInfo) labels(os string) map[string]string {
	l := t.Labels()
	l[karpv1.LabelOS] = os
	if t.CPUManufacturer != "" {
		l[awsv1.LabelInstanceCPUManufacturer] = strings.ToLower(t.CPUManufacturer)
	}
	if t.ClockSpeedMHz > 0 {
		l[awsv1.LabelInstanceCPUSustainedClockSpeedMhz] = strconv.FormatInt(t.ClockSpeedMHz, 10)
	}
	if t.EBSBandwidthMbps > 0 {
		l[awsv1.LabelInstanceEBSBandwidth] = strconv.FormatInt(t.EBSBandwidthMbps, 10)
	}
	if t.EncryptionInTransit != nil {
		l[awsv1.LabelInstanceEncryptionInTransitSupported] = strconv.FormatBool(*t.EncryptionInTransit)
	}
	if t.AcceleratorCount > 0 {
		l[awsv1.LabelInstanceAcceleratorName] = labelValue(t.AcceleratorName)
		l[awsv1.LabelInstanceAcceleratorManufacturer] = labelValue(t.AcceleratorManufacturer)
		l[awsv1.LabelInstanceAcceleratorCount] = strconv.Itoa(t.AcceleratorCount)
	}
	l[awsv1.LabelInstanceCapabilityFlex] = strconv.FormatBool(strings.HasSuffix(t.Family, "-flex"))
	return l
}

// labelValue lower-cases a vendor string and joins its words with dashes.
func labelValue(s string) string {
	return strings.Join(strings.Fields(strings.ToLower(s)), "-")
}
