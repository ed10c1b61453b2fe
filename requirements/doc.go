// Package requirements is the node-selector algebra of the scheduler: a Requirement is the set of
// values a node label may take (or its complement, integer bounds, and whether the label may be
// absent), and Requirements is a set of them keyed by label key. It builds them from Kubernetes
// node selector requirements, Karpenter requirements with minValues, labels and pods, and answers
// whether two sets can be satisfied by the same node and why not.
//
// It is the scheduler's hot path, so checks do not allocate. It must stay free of scheduling policy
// (which NodePool, which instance type) and of any Kubernetes client.
package requirements
