package v1

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Well-known Kubernetes node label keys Joiner reads and sets.
const (
	// LabelTopologyZone is the zone of a node ("us-east-1a").
	LabelTopologyZone = corev1.LabelTopologyZone
	// LabelTopologyRegion is the region of a node ("us-east-1").
	LabelTopologyRegion = corev1.LabelTopologyRegion
	// LabelInstanceType is the instance type of a node ("m5.large").
	LabelInstanceType = corev1.LabelInstanceTypeStable
	// LabelArch is the CPU architecture of a node ("amd64", "arm64").
	LabelArch = corev1.LabelArchStable
	// LabelOS is the operating system of a node ("linux").
	LabelOS = corev1.LabelOSStable
	// LabelWindowsBuild is the Windows build of a Windows node.
	LabelWindowsBuild = corev1.LabelWindowsBuild
	// LabelHostname is the hostname label; NodePools may not set or require it.
	LabelHostname = corev1.LabelHostname
)

// Values of well-known labels.
const (
	// ArchitectureAmd64 is the kubernetes.io/arch value of x86-64 nodes.
	ArchitectureAmd64 = "amd64"
	// ArchitectureArm64 is the kubernetes.io/arch value of 64-bit Arm nodes.
	ArchitectureArm64 = "arm64"
	// OSLinux is the kubernetes.io/os value of Linux nodes.
	OSLinux = "linux"

	// CapacityTypeSpot is the karpenter.sh/capacity-type value of spot capacity.
	CapacityTypeSpot = "spot"
	// CapacityTypeOnDemand is the karpenter.sh/capacity-type value of on-demand capacity.
	CapacityTypeOnDemand = "on-demand"
	// CapacityTypeReserved is the karpenter.sh/capacity-type value of reserved capacity
	// (capacity reservations).
	CapacityTypeReserved = "reserved"
)

// Karpenter label keys.
const (
	// NodePoolLabelKey names the NodePool of a NodeClaim and its Node. Users may not set it in
	// NodePool template labels or requirements.
	NodePoolLabelKey = Group + "/nodepool"
	// CapacityTypeLabelKey is the capacity type (spot, on-demand, reserved) of a node.
	CapacityTypeLabelKey = Group + "/capacity-type"
	// NodeRegisteredLabelKey is set to "true" on a Node once its NodeClaim is Registered.
	NodeRegisteredLabelKey = Group + "/registered"
	// NodeInitializedLabelKey is set to "true" on a Node once its NodeClaim is Initialized.
	NodeInitializedLabelKey = Group + "/initialized"
	// DoNotSyncTaintsLabelKey on a Node stops the NodeClaim's taints from being synced to it.
	DoNotSyncTaintsLabelKey = Group + "/do-not-sync-taints"

	// ExcludeFromExternalLoadBalancersLabelKey is added to a Node when it is tainted for
	// termination, with the value ExcludeFromExternalLoadBalancersLabelValue.
	ExcludeFromExternalLoadBalancersLabelKey = corev1.LabelNodeExcludeBalancers
	// ExcludeFromExternalLoadBalancersLabelValue is the value Karpenter sets on that label.
	ExcludeFromExternalLoadBalancersLabelValue = "karpenter"
)

// Karpenter annotation keys.
const (
	// DoNotDisruptAnnotationKey on a Pod ("true" or a duration from the pod's start) or on a Node
	// ("true") blocks voluntary disruption.
	DoNotDisruptAnnotationKey = Group + "/do-not-disrupt"
	// NodePoolHashAnnotationKey holds the hash of the NodePool template a NodeClaim was built from
	// (static drift detection).
	NodePoolHashAnnotationKey = Group + "/nodepool-hash"
	// NodePoolHashVersionAnnotationKey holds the version of the hash scheme (NodePoolHashVersion).
	NodePoolHashVersionAnnotationKey = Group + "/nodepool-hash-version"
	// NodeClaimTerminationTimestampAnnotationKey holds the deadline after which draining stops
	// waiting (deletion time + terminationGracePeriod).
	NodeClaimTerminationTimestampAnnotationKey = Group + "/nodeclaim-termination-timestamp"
	// NodeClaimMinValuesRelaxedAnnotationKey is "true" when minValues were relaxed for the
	// NodeClaim (MinValuesPolicy=BestEffort).
	NodeClaimMinValuesRelaxedAnnotationKey = Group + "/nodeclaim-min-values-relaxed"
	// RequestedDRADriversAnnotationKey lists the DRA drivers the NodeClaim's pods need.
	RequestedDRADriversAnnotationKey = Group + "/requested-dra-drivers"
	// PriceOverlayAppliedAnnotationKey marks a NodeClaim whose price came from a NodeOverlay.
	PriceOverlayAppliedAnnotationKey = Group + "/price-overlay-applied"
	// CapacityOverlayAppliedAnnotationKey marks a NodeClaim whose capacity came from a NodeOverlay.
	CapacityOverlayAppliedAnnotationKey = Group + "/capacity-overlay-applied"
	// ProviderCompatibilityAnnotationKey records provider compatibility information.
	ProviderCompatibilityAnnotationKey = "compatibility." + Group + "/provider"
	// PodDeletionCostAnnotationKey is the Kubernetes pod deletion cost, an input to disruption cost.
	PodDeletionCostAnnotationKey = "controller.kubernetes.io/pod-deletion-cost"
)

// NodePoolHashVersion is the version of the NodePool template hash scheme; NodeClaims whose
// karpenter.sh/nodepool-hash-version differs are re-hashed rather than marked drifted.
const NodePoolHashVersion = "v3"

// TerminationFinalizer is the finalizer on NodeClaims and Nodes that holds deletion until the
// node is drained and its instance terminated.
const TerminationFinalizer = Group + "/termination"

// Karpenter taint keys.
const (
	// DisruptedTaintKey is the key of the NoSchedule taint on nodes being disrupted or terminated.
	DisruptedTaintKey = Group + "/disrupted"
	// UnregisteredTaintKey is the key of the NoExecute taint new nodes carry until registration.
	UnregisteredTaintKey = Group + "/unregistered"
)

// DisruptedNoScheduleTaint returns the taint karpenter.sh/disrupted:NoSchedule, applied to
// disruption candidates and terminating nodes.
func DisruptedNoScheduleTaint() corev1.Taint {
	return corev1.Taint{Key: DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}
}

// UnregisteredNoExecuteTaint returns the taint karpenter.sh/unregistered:NoExecute, which new
// nodes carry until their NodeClaim is registered.
func UnregisteredNoExecuteTaint() corev1.Taint {
	return corev1.Taint{Key: UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}
}

// Condition types shared by NodePool and NodeClaim.
const (
	// ConditionTypeReady is the root condition: true when all the kind's readiness conditions are.
	ConditionTypeReady = "Ready"
)

// NodePool condition types. ValidationSucceeded and NodeClassReady make up Ready.
const (
	// ConditionTypeValidationSucceeded reports whether the runtime validation of the NodePool passed.
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
	// ConditionTypeNodeClassReady reports whether the referenced node class exists and is Ready.
	ConditionTypeNodeClassReady = "NodeClassReady"
	// ConditionTypeNodeRegistrationHealthy reports whether launched nodes register; False points to
	// a misconfiguration that needs a human. Not part of Ready.
	ConditionTypeNodeRegistrationHealthy = "NodeRegistrationHealthy"
)

// NodeClaim condition types. Launched, Registered and Initialized make up Ready.
const (
	// ConditionTypeLaunched is true once the cloud provider created the instance.
	ConditionTypeLaunched = "Launched"
	// ConditionTypeRegistered is true once a Node with the NodeClaim's provider ID joined and was
	// synced (labels, taints, finalizer, owner).
	ConditionTypeRegistered = "Registered"
	// ConditionTypeInitialized is true once the Node is Ready, its startup taints are gone and its
	// extended resources are registered.
	ConditionTypeInitialized = "Initialized"
	// ConditionTypeConsolidatable is true once the node has seen no pod event for consolidateAfter.
	ConditionTypeConsolidatable = "Consolidatable"
	// ConditionTypeDrifted is true when the node no longer matches its NodePool or node class.
	ConditionTypeDrifted = "Drifted"
	// ConditionTypeExpired is Joiner's, not Karpenter's: True once a NodeClaim of a NodePool with
	// graceful expiration (ExpirationAnnotationKey: ExpirationGraceful) has passed its expireAfter
	// deadline (plus jitter). Disruption then replaces it within the budgets; the NodeClaim is
	// deleted forcefully if that has not happened by the end of the grace period. NodeClaims that
	// expire forcefully, as in Karpenter, never carry it.
	ConditionTypeExpired = "Expired"
	// ConditionTypeDisruptionReason carries the reason of the disruption that tainted the node.
	ConditionTypeDisruptionReason = "DisruptionReason"
	// ConditionTypeDrained reports whether the node's pods were evicted during termination.
	ConditionTypeDrained = "Drained"
	// ConditionTypeVolumesDetached reports whether the node's volumes were detached during
	// termination.
	ConditionTypeVolumesDetached = "VolumesDetached"
	// ConditionTypeInstanceTerminating is true once the instance's termination was requested.
	ConditionTypeInstanceTerminating = "InstanceTerminating"
	// ConditionTypeConsistentStateFound is False when the node has less than 90% of the expected
	// capacity.
	ConditionTypeConsistentStateFound = "ConsistentStateFound"
)

// WellKnownLabels returns the label keys of restricted domains that NodePools and pods may still
// use to select nodes: nodepool, zone, region, instance type, arch, os, capacity type and Windows
// build. Each call returns a new set.
func WellKnownLabels() sets.Set[string] {
	return sets.New(
		NodePoolLabelKey,
		LabelTopologyZone,
		LabelTopologyRegion,
		LabelInstanceType,
		LabelArch,
		LabelOS,
		CapacityTypeLabelKey,
		LabelWindowsBuild,
	)
}

// NormalizedLabelKey maps a deprecated beta label key to its stable well-known key
// (failure-domain.beta.kubernetes.io/zone to topology.kubernetes.io/zone, beta.kubernetes.io/arch
// to kubernetes.io/arch, ...). Other keys are returned unchanged.
func NormalizedLabelKey(key string) string {
	switch key {
	case corev1.LabelFailureDomainBetaZone:
		return LabelTopologyZone
	case corev1.LabelFailureDomainBetaRegion:
		return LabelTopologyRegion
	case corev1.LabelInstanceType:
		return LabelInstanceType
	case "beta.kubernetes.io/arch":
		return LabelArch
	case "beta.kubernetes.io/os":
		return LabelOS
	}
	return key
}

// NodeClassLabelKey returns the label key that names a node's node class:
// "<group>/<lower-case kind>", for example "karpenter.k8s.aws/ec2nodeclass".
func NodeClassLabelKey(gk schema.GroupKind) string {
	return gk.Group + "/" + strings.ToLower(gk.Kind)
}
