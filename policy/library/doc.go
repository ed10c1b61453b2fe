// Package library ships Joiner's ready-made ProvisioningPolicies, one folder each with a policy.yaml manifest
// (apiVersion joiner.dev/v1alpha1, inline Rego, documented parameters) and a policy_test.rego that exercises
// allowed and denied NodePools. Apply a manifest with kubectl, or check files against the whole folder with
// `joiner policy check`. The folder holds data only; Go code here just embeds it and tests it.
//
//	team-tenancy             NodePool label joiner.dev/team must name an allowed team; nodes carry the same label
//	spot-outside-production  NodePools not labelled joiner.dev/environment=production may launch spot only
//	instance-allow-list      instance categories/families/types must be on an allow-list, selected with In
//	cpu-limit                spec.limits.cpu required, capped per NodePool and per team (via data.inventory)
//	expire-after             spec.template.spec.expireAfter not Never and at most 720h
//	gpu-taint                NodePools that select GPU instances must carry the nvidia.com/gpu taint
//	production-budgets       production NodePools need disruption budgets of at most 20% of nodes
package library

import "embed"

// Manifests holds every <policy>/policy.yaml and <policy>/policy_test.rego of the library, for installers
// and CLIs that ship the library inside the binary.
//
//go:embed */policy.yaml */policy_test.rego
var Manifests embed.FS
