package aws

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// ec2Type returns a DescribeInstanceTypes record with the fields the provider reads.
func ec2Type(name, arch string, vcpus int32, memMiB int64, enis, ipv4 int32) ec2types.InstanceTypeInfo {
	return ec2types.InstanceTypeInfo{
		InstanceType:          ec2types.InstanceType(name),
		SupportedUsageClasses: []ec2types.UsageClassType{ec2types.UsageClassTypeOnDemand, ec2types.UsageClassTypeSpot},
		Hypervisor:            ec2types.InstanceTypeHypervisorNitro,
		BareMetal:             aws.Bool(false),
		ProcessorInfo: &ec2types.ProcessorInfo{
			SupportedArchitectures:   []ec2types.ArchitectureType{ec2types.ArchitectureType(arch)},
			Manufacturer:             aws.String("Intel"),
			SustainedClockSpeedInGhz: aws.Float64(3.1),
		},
		VCpuInfo:   &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(vcpus)},
		MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(memMiB)},
		EbsInfo: &ec2types.EbsInfo{EbsOptimizedInfo: &ec2types.EbsOptimizedInfo{
			MaximumBandwidthInMbps: aws.Int32(4750),
		}},
		NetworkInfo: &ec2types.NetworkInfo{
			MaximumNetworkInterfaces:     aws.Int32(enis),
			Ipv4AddressesPerInterface:    aws.Int32(ipv4),
			DefaultNetworkCardIndex:      aws.Int32(0),
			EncryptionInTransitSupported: aws.Bool(false),
			NetworkCards: []ec2types.NetworkCardInfo{{
				NetworkCardIndex: aws.Int32(0), MaximumNetworkInterfaces: aws.Int32(enis), BaselineBandwidthInGbps: aws.Float64(0.75),
			}},
		},
	}
}

// m5Large is m5.large as EC2 describes it: 2 vCPUs, 8 GiB, 3 ENIs of 10 IPv4 addresses.
func m5Large() typeInfo {
	info, ok := infoFromEC2(ec2Type("m5.large", "x86_64", 2, 8192, 3, 10), []string{"us-east-1b", "us-east-1a"})
	if !ok {
		panic("m5.large fixture rejected")
	}
	return info
}

// fakeEC2 answers the read calls of the instance-type and pricing code from canned data; other
// calls panic (the embedded interface is nil).
type fakeEC2 struct {
	EC2API
	types     []ec2types.InstanceTypeInfo
	offerings []ec2types.InstanceTypeOffering
	spot      []ec2types.SpotPrice
	err       error

	mu    sync.Mutex
	calls map[string]int
}

// callCount returns how often op was called.
func (f *fakeEC2) callCount(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

func (f *fakeEC2) count(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[op]++
}

func (f *fakeEC2) DescribeInstanceTypes(_ context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	f.count("DescribeInstanceTypes")
	if f.err != nil {
		return nil, f.err
	}
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: f.types}, nil
}

func (f *fakeEC2) DescribeInstanceTypeOfferings(_ context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	f.count("DescribeInstanceTypeOfferings")
	if f.err != nil {
		return nil, f.err
	}
	return &ec2.DescribeInstanceTypeOfferingsOutput{InstanceTypeOfferings: f.offerings}, nil
}

func (f *fakeEC2) DescribeSpotPriceHistory(_ context.Context, in *ec2.DescribeSpotPriceHistoryInput, _ ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	f.count("DescribeSpotPriceHistory")
	if f.err != nil {
		return nil, f.err
	}
	return &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: f.spot}, nil
}

func offering(it, zone string) ec2types.InstanceTypeOffering {
	return ec2types.InstanceTypeOffering{InstanceType: ec2types.InstanceType(it), Location: aws.String(zone), LocationType: ec2types.LocationTypeAvailabilityZone}
}

func spotPrice(it, zone, price string, at time.Time) ec2types.SpotPrice {
	return ec2types.SpotPrice{InstanceType: ec2types.InstanceType(it), AvailabilityZone: aws.String(zone), SpotPrice: aws.String(price), Timestamp: aws.Time(at)}
}
