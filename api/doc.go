// Package api holds Joiner's API types, one package per group and version: karpenter/v1
// (karpenter.sh NodePool and NodeClaim), aws/v1 (karpenter.k8s.aws EC2NodeClass) and
// joiner/v1alpha1 (joiner.dev LocalNodeClass and ProvisioningPolicy) and autoscaling/v1beta1
// (autoscaling.x-k8s.io CapacityBuffer). `make generate` writes the
// deepcopy code and the CRDs in config/crd/bases from them; nothing else may.
package api
