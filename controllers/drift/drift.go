package drift

import (
	"fmt"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"
)

// Drift reasons found by this package; the cloud provider reports its own (package
// cloudprovider's DriftReason).
const (
	// ReasonNodePoolDrifted: the NodePool's template hash differs from the one the NodeClaim was
	// built with (a template label, annotation, taint, startup taint, nodeClassRef,
	// terminationGracePeriod or expireAfter changed).
	ReasonNodePoolDrifted cloudprovider.DriftReason = "NodePoolDrifted"
	// ReasonRequirementsDrifted: the NodeClaim's labels no longer satisfy the NodePool's
	// requirements.
	ReasonRequirementsDrifted cloudprovider.DriftReason = "RequirementsDrifted"
)

// staticDrift returns ReasonNodePoolDrifted when the NodePool's karpenter.sh/nodepool-hash
// differs from the NodeClaim's. Like Karpenter, it compares only when both objects carry the hash
// and the hash version and the versions are equal: hashes of different schemes say nothing.
func staticDrift(np *karpv1.NodePool, nc *karpv1.NodeClaim) cloudprovider.DriftReason {
	poolHash, ok1 := np.Annotations[karpv1.NodePoolHashAnnotationKey]
	poolVersion, ok2 := np.Annotations[karpv1.NodePoolHashVersionAnnotationKey]
	claimHash, ok3 := nc.Annotations[karpv1.NodePoolHashAnnotationKey]
	claimVersion, ok4 := nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey]
	if !ok1 || !ok2 || !ok3 || !ok4 || poolVersion != claimVersion {
		return ""
	}
	if poolHash != claimHash {
		return ReasonNodePoolDrifted
	}
	return ""
}

// requirementsDrift returns ReasonRequirementsDrifted when the NodeClaim's labels, read as
// requirements (one value per key), are not compatible with the NodePool's requirements: some
// requirement excludes the node's value, or needs a label the node lacks. Widening a requirement
// therefore never drifts a node, and narrowing it drifts only the nodes whose value falls out.
func requirementsDrift(np *karpv1.NodePool, nc *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	poolReqs, err := requirements.FromNodeSelectorRequirementsWithMinValues(np.Spec.Template.Spec.Requirements...)
	if err != nil {
		return "", fmt.Errorf("nodepool %s spec.template.spec.requirements: %w", np.Name, err)
	}
	if requirements.FromLabels(nc.Labels).Compatible(poolReqs) != nil {
		return ReasonRequirementsDrifted, nil
	}
	return "", nil
}
