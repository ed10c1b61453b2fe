// Package scheduling is the provisioner's scheduling simulation: given pending pods, existing
// nodes, NodePools with their instance types and DaemonSets, it decides which pods go on existing
// nodes and which new NodeClaims to launch for the rest, packing pods so that the new capacity is
// cheap, and explains every pod it cannot place.
//
// It is pure: inputs in, decisions out. It must not use a Kubernetes client, a clock or a cloud
// provider, and must not modify its inputs.
//
// Solve runs one simulation from scratch. Prepare does the part that depends only on the
// NodePools, their instance types, the DaemonSets and the Options once, returning an immutable
// Scheduler whose Solve can then run any number of simulations, also concurrently; NodePool limits
// are passed to every Scheduler.Solve, since they change as NodeClaims launch.
package scheduling
