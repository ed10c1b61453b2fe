// Package resources is the resource arithmetic of the scheduling simulation: Vec, an amount of
// resources with the four core ones (cpu, memory, pods, ephemeral-storage) in a fixed array and
// the extended ones in a map; conversion from and to resource lists, sums, differences and fit
// checks; what a pod requests (PodRequests); and what a placement needs of extended resources
// (ExtendedNeeds).
//
// It is arithmetic only: it must not know about nodes, NodePools, instance types, prices or the
// simulation's state, and must not modify the resource lists and pods it reads.
package resources
