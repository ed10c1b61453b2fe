// Package convert rewrites manifests written for Karpenter's legacy APIs — karpenter.sh/v1alpha5
// Provisioner, karpenter.k8s.aws/v1alpha1 AWSNodeTemplate, and karpenter.sh/v1beta1 NodePool and
// NodeClaim and karpenter.k8s.aws/v1beta1 EC2NodeClass — into the v1 API that Joiner serves, following
// Karpenter's documented migration, and renames the legacy annotations and labels in other manifests.
//
// It works on YAML nodes, so comments stay with the fields they describe, and it makes the behaviour
// the old APIs left to their defaults explicit (a Provisioner without ttlSecondsUntilExpired never
// expired its nodes, so its NodePool gets expireAfter: Never). A field that has no v1 equivalent is
// never dropped silently: it is reported as a Finding that says what to do. Objects already in v1, and
// objects that need no change, are written back byte for byte.
//
// It reads and writes files, and never talks to a cluster.
package convert
