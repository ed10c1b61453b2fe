// Package aws is Joiner's AWS cloud provider: it launches EC2 instances for NodeClaims through
// CreateFleet (type instant) from launch templates it creates and garbage-collects, prices and
// shapes instance types from DescribeInstanceTypes, DescribeInstanceTypeOfferings,
// DescribeSpotPriceHistory and the embedded catalog, remembers offerings that ran out of
// capacity for a few minutes, and reports AMI, security-group and subnet drift against the
// EC2NodeClass status.
//
// It implements cloudprovider.CloudProvider and nothing else. It reads EC2NodeClasses but never
// writes them: resolving subnets, security groups, AMIs and the instance profile into the status
// is the job of package nodeclass, whose controller Factory wires next to the provider.
package aws
