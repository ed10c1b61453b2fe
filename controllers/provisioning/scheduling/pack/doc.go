// Package pack is the packer of the scheduling simulation: pods that only need resources, packed
// from scratch onto nodes of one option set (the scheduler's repacking pass decides which pods
// those are, and keeps the packing when it is cheaper).
//
// It is a pure function of its inputs: it must not know about NodePools, topology, taints or
// limits, nor keep state between calls or modify its inputs.
//
// It opens one node at a time until every pod has one:
//
//   - The node's option is chosen by the value of the pending demand it can hold at the dual
//     prices of the covering LP (coverlp) of the pending demand over the options: the LP's
//     optimum mixes the types that cover the demand at least price per unit, and its dual prices
//     say what a millicore, a byte or a GPU is worth in that optimum. An option's efficiency is the
//     value of the demand its room can take (each resource capped at what is pending, and counted
//     in whole copies of the largest pending pod) over its price: 1 for the types of the LP's
//     optimum while much is pending, less for the others and for types larger than what is left.
//     The most efficient option wins; among equals, the one the LP uses most, weighed by how much
//     it is shaped like the pod that opens the node.
//   - The node is filled, starting with the largest pending pod, by the pending pod a fill rule
//     scores best against the room left, until no pending pod fits. The rules measure each
//     resource as a share of the node and aim at a node whose resources run out together: a
//     cpu-rich type then takes cpu-heavy pods and a memory-rich one memory-heavy pods, which is
//     how the LP's mix of types gets used in full.
//   - The node then takes the cheapest option that fits what it holds.
//
// No one fill rule is best on every workload (taking the largest pods first fills nodes well when
// shapes vary a lot, keeping nodes balanced does better when a few shapes each suit one type), so
// pack runs each fillRule and keeps the cheapest packing. Pods with extended resources (GPUs) come
// first, so that the nodes they open take them with the pods that fill the rest.
package pack
