package nodeclass

import (
	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// HashVersion is the version of Hash's algorithm, written next to the hash in
// karpenter.k8s.aws/ec2nodeclass-hash-version. Static drift compares hashes only between equal
// versions, and the controller re-stamps a class's NodeClaims when it changes.
//
// Hash is not Karpenter's algorithm (awsv1.EC2NodeClassHashVersion), so it must not claim
// Karpenter's version: when Joiner takes a cluster over from Karpenter, the class's version
// differs from this one and the NodeClaims Karpenter launched are re-stamped with Joiner's hash
// instead of all drifting at once; when Karpenter takes it back, it re-stamps them the same way.
const HashVersion = "joiner-v1"

// Hash returns the static drift hash of the class: the decimal string of a 64-bit hashstructure
// (FormatV2, SlicesAsSets, IgnoreZeroValue, ZeroNil) hash of its spec and its effective AMI family.
// What drifts dynamically is left out: the subnet, security group, capacity reservation and AMI
// selector terms (their resolved values are compared instead), ipPrefixCount, and spec.amiFamily
// itself, replaced by the effective family, so that an unset amiFamily with an al2023 alias
// hashes like amiFamily AL2023. Volume sizes hash by value ("20Gi"). The provider stamps the same
// value on the NodeClaims it launches.
func Hash(nc *awsv1.EC2NodeClass) string {
	spec := nc.Spec.DeepCopy()
	spec.SubnetSelectorTerms = nil
	spec.SecurityGroupSelectorTerms = nil
	spec.CapacityReservationSelectorTerms = nil
	spec.AMISelectorTerms = nil
	spec.IPPrefixCount = nil
	spec.AMIFamily = nil
	// resource.Quantity keeps its value in unexported fields, which hashstructure skips: hash
	// the block devices with the size as a string instead.
	type BlockDevice struct {
		DeleteOnTermination      *bool
		Encrypted                *bool
		IOPS                     *int64
		KMSKeyID                 *string
		SnapshotID               *string
		Throughput               *int64
		VolumeInitializationRate *int32
		VolumeSize               string
		VolumeType               *string
	}
	type BlockDeviceMapping struct {
		DeviceName *string
		EBS        *BlockDevice
		RootVolume bool
	}
	bdms := make([]BlockDeviceMapping, 0, len(spec.BlockDeviceMappings))
	for _, m := range spec.BlockDeviceMappings {
		out := BlockDeviceMapping{DeviceName: m.DeviceName, RootVolume: m.RootVolume}
		if e := m.EBS; e != nil {
			out.EBS = &BlockDevice{DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, IOPS: e.IOPS, KMSKeyID: e.KMSKeyID,
				SnapshotID: e.SnapshotID, Throughput: e.Throughput, VolumeInitializationRate: e.VolumeInitializationRate, VolumeType: e.VolumeType}
			if e.VolumeSize != nil {
				out.EBS.VolumeSize = e.VolumeSize.String()
			}
		}
		bdms = append(bdms, out)
	}
	spec.BlockDeviceMappings = nil
	return karpv1.DriftHash([]any{spec, bdms, nc.AMIFamily()}, "EC2NodeClass "+nc.Name)
}
