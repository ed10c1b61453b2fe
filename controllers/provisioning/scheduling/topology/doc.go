// Package topology is the topology accounting of the scheduling simulation: the topology keys
// and their domains, the distinct topology constraints of the pods (groups: topology spreads, pod
// affinities and anti-affinities, shared by every pod that declares the same one) with their
// counts per domain, the constraints read from a pod's spec (ConstraintsOf), and the check of
// one group against one domain or node (OwnRefuses, OthersRefuseNode, OthersRefuseDomain).
//
// It counts and checks only: it must not choose where a pod goes, know about NodePools,
// instance types, prices or bins, nor modify the pods it reads. The scheduler owns the search
// and calls these checks.
package topology
