// Package nodeclass is the EC2NodeClass controller of the AWS provider. It resolves a class's
// selector terms against AWS (subnets, security groups, AMIs with aliases through the SSM
// parameters AWS publishes, capacity reservations) and its instance profile (creating and
// tagging one for spec.role), writes them into status with one condition per dependency and
// Ready, keeps the drift hash annotations current, and on deletion waits for the class's
// NodeClaims before it deletes the instance profile it created.
//
// It must not launch, tag or terminate instances, nor manage launch templates: the provider
// (package providers/aws) does, and may hook its own clean-up into termination through
// Options.Cleanup. The provider reads what this controller resolved from the class's status.
package nodeclass
