// Package nodeclaim is the NodeClaim lifecycle controller: it puts the termination finalizer on
// every NodeClaim, launches its instance through the CloudProvider (launch.go), registers the
// Node that joins with the same provider ID (registration.go), waits for that Node to become
// usable (initialization.go), and deletes NodeClaims whose Node never registers, or whose instance
// the provider no longer knows before it registered (liveness.go).
// controller.go composes those stages in that order and writes the result once.
//
// Package controllers wires it with garbage collection, NodePool status and termination. This
// package never drains or deletes Nodes and never terminates instances
// itself: a NodeClaim it gives up on is deleted, and the termination controller drains its Node
// and terminates its instance.
package nodeclaim
