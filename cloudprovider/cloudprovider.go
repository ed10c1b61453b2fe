package cloudprovider

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// CloudProvider launches and tracks the machines behind NodeClaims. Implementations must be safe
// for concurrent use.
type CloudProvider interface {
	// Create launches a machine for the NodeClaim, choosing among the instance types and offerings
	// its requirements allow, and returns a copy of the NodeClaim with status.providerID,
	// status.capacity, status.allocatable and the resolved labels (instance type, zone, capacity
	// type, ...) filled in. It returns an *InsufficientCapacityError when no allowed offering has
	// capacity, and a *NodeClassNotReadyError when the node class cannot be used yet.
	Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error)
	// Delete terminates the NodeClaim's machine. It is idempotent and returns a
	// *NodeClaimNotFoundError once the machine is gone, which callers treat as success.
	Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error
	// Get returns the NodeClaim of the machine with the provider ID, or a *NodeClaimNotFoundError.
	Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error)
	// List returns a NodeClaim for every machine the provider launched for this cluster,
	// including ones Joiner lost track of (garbage collection compares the two).
	List(ctx context.Context) ([]*karpv1.NodeClaim, error)
	// GetInstanceTypes returns every instance type the NodePool's node class can launch, with
	// offerings marked unavailable rather than left out when capacity is short.
	GetInstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*InstanceType, error)
	// IsDrifted reports why the NodeClaim's machine no longer matches its node class (for
	// instance a new machine image), or "" when it does not drift.
	IsDrifted(ctx context.Context, nodeClaim *karpv1.NodeClaim) (DriftReason, error)
	// RepairPolicies returns the Node conditions that mark a machine as broken and how long each
	// is tolerated before node repair replaces the machine (Karpenter's NodeRepair gate). An empty
	// list turns node repair off for the provider.
	RepairPolicies() []RepairPolicy
	// Name returns the provider's name, such as "aws", "local" or "fake".
	Name() string
}

// DriftReason says why a machine drifted from its node class; "" means it did not.
type DriftReason string

// RepairPolicy is one unhealthy Node condition node repair acts on: a Node whose condition of
// ConditionType has had ConditionStatus for TolerationDuration (measured from the condition's
// lastTransitionTime) is replaced.
type RepairPolicy struct {
	// ConditionType is the Node condition, such as Ready.
	ConditionType corev1.NodeConditionType
	// ConditionStatus is the status that marks the Node unhealthy, such as False or Unknown.
	ConditionStatus corev1.ConditionStatus
	// TolerationDuration is how long the condition may hold before the Node is repaired.
	TolerationDuration time.Duration
}

// ReadyRepairPolicies are the policies every provider starts from: a Node whose Ready condition
// has been False or Unknown for 30 minutes is repaired (Karpenter's toleration).
func ReadyRepairPolicies() []RepairPolicy {
	return []RepairPolicy{
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute},
		{ConditionType: corev1.NodeReady, ConditionStatus: corev1.ConditionUnknown, TolerationDuration: 30 * time.Minute},
	}
}
