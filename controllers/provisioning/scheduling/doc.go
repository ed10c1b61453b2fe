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
// are passed to every Scheduler.Solve, since they change as NodeClaims launch. Scheduler.WithVolumes
// gives it the cluster's storage (Volumes), so that pods are placed where their volumes can be
// used.
//
// # Map of the files
//
// The phases, in the order they run:
//
//   - types.go: the inputs (Input, NodePool, ExistingNode, Options) and outputs (Results,
//     NodeClaimPlan, PodError). bin.go's NewExistingNode and NewInFlightNodeClaim turn a Node or
//     an in-flight NodeClaim into an ExistingNode.
//   - scheduler.go, Prepare (once per set of NodePools): converts the DaemonSet pods (pods.go) and
//     builds one poolTemplate per NodePool (template.go, newPoolTemplate), sorted by weight. This
//     is where a NodePool's instance types are first narrowed: to those compatible with its
//     requirements and labels, priced and converted, with the DaemonSet overhead of its nodes
//     (daemons.go prepareDaemons: per NodePool for a DaemonSet on every node, else per instance
//     type, or per option set where it depends on the offering).
//   - scheduler.go, Scheduler.Solve (or solve.go, the package-level Solve, which is Prepare plus
//     one Scheduler.Solve): takes the NodePools' remaining limits and runs one simulation.
//   - setup.go, newSolver, in this order: preparePods (pods.go newPodInfo: requests (resources
//     PodRequests), node requirements with those of the pod's volumes (volumes.go), host ports,
//     soft node affinity; topology.ConstraintsOf), prepareNodePools (template.go
//     newTemplate: a per-simulation template carrying the remaining limits), prepareGroups
//     (topology.GroupFor: shared topology groups), prepareSelection (which groups count each
//     pod, and which NodePools' taints it tolerates, via taints.go), prepareExistingNodes (each
//     existing node becomes a bin with its pods counted), prepareOrder (pod sizes, and the
//     prospective NodeClaim each NodePool would open).
//   - solve.go, solver.run: sorts the pods (queueOrder), indexes the bins (binindex.go, with
//     binbuckets.go and bincandidates.go), then
//     places them in passes; later passes retry failed pods, dropping their soft constraints one
//     at a time (pods.go relax, in the order sortPrefs sets). solver.place is where a pod gets
//     placed: bestPlacement looks, through the bin index, at the existing nodes and planned
//     NodeClaims that can take it, then at the first NodePool whose prospective NodeClaim takes
//     it, and keeps the cheapest placement: by unit price first (sizing.go: a NodeClaim is sized
//     for the pods still to come, and commits to a budget), then by the price it adds.
//   - fit.go: estimate (a cheap bound from resources alone) and fit, which checks one placement
//     as a list of checks, one function per constraint: fitsTaints, fitsHostPorts,
//     fitsNodeRequirements, fitsTopology (topologycheck.go: the groups of the node itself, then
//     each other key, pinning an open zone or other domain of a planned NodeClaim; each group is
//     checked by the topology package), then for a planned NodeClaim the instance types left
//     (template.go optionsFor and cheapestFit: the per-NodeClaim narrowing of instance types),
//     fitsMinValues and fitsLimits (template.go limits.allows). plan.go orders the placements.
//   - commit.go: applies the chosen placement: opens the NodeClaim if it is new, reserves its
//     capacity against the limits, records the narrowed requirements and topology counts.
//   - repack.go: the repacking pass, run by solver.run once every pod has been tried: the pods
//     that only need resources are packed again from scratch (the pack package, guided by the covering LP
//     of their demand over the instance types) within each class of planned NodeClaims that share
//     a NodePool and requirements, and the new packing is kept when it is cheaper.
//   - improve.go: the improvement pass, run next: moves pods off planned NodeClaims when that
//     lowers the total price, undoing what does not help.
//   - finalize.go, solver.results: each planned NodeClaim's final instance-type options (those
//     fitting its pods, within what the NodePool's limits leave for the largest option,
//     truncated to MaxInstanceTypes; the last narrowing), and NodeClaimPlan.NodeClaim.
//   - explain.go: the UnschedulableError of each pod that could not be placed, by re-running fit
//     with a reason collector against every NodePool and existing node; a volume that rules one
//     out is named first, with its claim (volumes.go volumeRefusal).
//
// Supporting files: bin.go (a node in the simulation), pods.go (a pod in the simulation and its
// soft constraints), template.go (a NodePool in the simulation: instance types, option sets,
// limits), topologycheck.go (the topology checks of fit), taints.go (tolerations),
// daemons.go (where DaemonSet pods run, and the overhead they add), volumes.go (where a pod's
// volumes can be used: Volumes, and the requirements of claims, volumes and StorageClasses).
//
// Subpackages, each pure: resources (resource arithmetic: Vec, pod requests, extended
// resources), topology (topology keys, domains and groups, their counts and the check of one
// group), pack (the packer of the repacking pass) and coverlp (the covering LP).
//
// Where NodePool limits are applied: they enter through Scheduler.Solve (NodePool.Remaining for
// the package-level Solve), become template.go's limits in setup.go, are checked in fit.go,
// reserved in commit.go, swapped by repack.go when a packing keeps within them, released and
// restored by the moves of improve.go, and bound the final options in finalize.go.
package scheduling
