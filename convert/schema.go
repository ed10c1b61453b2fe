package convert

import "strings"

// Legacy and v1 API versions and kinds, as written in manifests.
const (
	apiAlpha5      = "karpenter.sh/v1alpha5"
	apiAWSAlpha1   = "karpenter.k8s.aws/v1alpha1"
	apiBeta1       = "karpenter.sh/v1beta1"
	apiAWSBeta1    = "karpenter.k8s.aws/v1beta1"
	apiV1          = "karpenter.sh/v1"
	apiAWSV1       = "karpenter.k8s.aws/v1"
	groupKarpenter = "karpenter.sh"
	groupAWS       = "karpenter.k8s.aws"

	kindProvisioner     = "Provisioner"
	kindMachine         = "Machine"
	kindAWSNodeTemplate = "AWSNodeTemplate"
	kindNodePool        = "NodePool"
	kindNodeClaim       = "NodeClaim"
	kindEC2NodeClass    = "EC2NodeClass"

	// kindProvider names the inline spec.provider block of a Provisioner in messages and belongsAt.
	kindProvider = "inline provider"
)

// knownPaths lists the fields of each legacy kind (dotted paths from the object root), to tell a
// misplaced field — one that exists elsewhere in the kind — from an unknown one. kindProvider lists the
// Provisioner's fields with those of its inline provider.
func knownPaths(kind string) []string {
	meta := []string{"apiVersion", "kind", "metadata", "spec", "status", "metadata.name", "metadata.labels", "metadata.annotations"}
	aws := []string{"amiFamily", "amiSelector", "subnetSelector", "securityGroupSelector", "instanceProfile", "tags",
		"launchTemplate", "metadataOptions", "blockDeviceMappings", "userData", "detailedMonitoring", "context"}
	switch kind {
	case kindProvisioner:
		return append(meta, "spec.requirements", "spec.labels", "spec.annotations", "spec.taints", "spec.startupTaints",
			"spec.limits", "spec.limits.resources", "spec.weight", "spec.ttlSecondsUntilExpired", "spec.ttlSecondsAfterEmpty",
			"spec.consolidation", "spec.consolidation.enabled", "spec.kubeletConfiguration", "spec.providerRef", "spec.provider",
			"spec.providerRef.name", "spec.providerRef.kind", "spec.providerRef.apiVersion")
	case kindProvider:
		return append(knownPaths(kindProvisioner), prefixed("spec.provider.", aws)...)
	case kindAWSNodeTemplate:
		return append(meta, prefixed("spec.", aws)...)
	case kindNodePool:
		return append(meta, "spec.template", "spec.template.metadata", "spec.template.metadata.labels",
			"spec.template.metadata.annotations", "spec.template.spec", "spec.template.spec.requirements",
			"spec.template.spec.taints", "spec.template.spec.startupTaints", "spec.template.spec.kubelet",
			"spec.template.spec.nodeClassRef", "spec.template.spec.resources", "spec.disruption",
			"spec.disruption.consolidationPolicy", "spec.disruption.consolidateAfter", "spec.disruption.expireAfter",
			"spec.disruption.budgets", "spec.limits", "spec.weight")
	case kindNodeClaim:
		return append(meta, "spec.taints", "spec.startupTaints", "spec.requirements", "spec.resources", "spec.kubelet",
			"spec.nodeClassRef")
	case kindEC2NodeClass:
		return append(meta, "spec.subnetSelectorTerms", "spec.securityGroupSelectorTerms", "spec.amiSelectorTerms",
			"spec.amiFamily", "spec.userData", "spec.role", "spec.instanceProfile", "spec.tags", "spec.blockDeviceMappings",
			"spec.instanceStorePolicy", "spec.detailedMonitoring", "spec.associatePublicIPAddress", "spec.metadataOptions",
			"spec.context")
	}
	return meta
}

// prefixed returns each name with prefix in front.
func prefixed(prefix string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = prefix + n
	}
	return out
}

// belongsAt returns the paths of kind whose last element is key, other than field itself.
func belongsAt(kind, key, field string) []string {
	var out []string
	for _, p := range knownPaths(kind) {
		if p != field && (p == key || strings.HasSuffix(p, "."+key)) {
			out = append(out, p)
		}
	}
	return out
}

// kubeletFields are the kubelet settings v1 keeps in EC2NodeClass spec.kubelet (Karpenter v1.14.1's
// typed struct).
func kubeletFields() []string {
	return []string{"clusterDNS", "maxPods", "podsPerCore", "systemReserved", "kubeReserved", "evictionHard", "evictionSoft",
		"evictionSoftGracePeriod", "evictionMaxPodGracePeriod", "imageGCHighThresholdPercent", "imageGCLowThresholdPercent",
		"cpuCFSQuota"}
}

// serverMetadata are metadata fields the API server or controllers set; they are not written to
// converted manifests.
func serverMetadata() []string {
	return []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink",
		"deletionTimestamp", "deletionGracePeriodSeconds", "ownerReferences", "finalizers"}
}
