package cloudprovider

import (
	"context"

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
	// Name returns the provider's name, such as "aws", "local" or "fake".
	Name() string
}

// DriftReason says why a machine drifted from its node class; "" means it did not.
type DriftReason string
