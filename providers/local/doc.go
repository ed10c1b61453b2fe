// Package local is Joiner's local cloud provider: it simulates cloud instances on one machine.
// Instance types and prices come from the embedded catalog of real EC2 types; "launching" an
// instance records it in memory and, after the LocalNodeClass's nodeRegistrationDelay, creates a
// Node annotated for kwok, which plays its kubelet. Deleting that Node is how a local instance
// terminates. Failures (insufficient capacity, launch errors, instances that never register) can
// be injected at runtime for tests.
//
// It implements cloudprovider.CloudProvider and nothing else: it must not reconcile NodeClaims,
// sync labels or taints after launch, or talk to a real cloud. It only ever creates and deletes
// the Nodes of its own instances (provider IDs starting with "local:///").
package local
