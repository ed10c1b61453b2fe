package planner

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/nodepredicates"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/controllers/state"
)

// Annotations Joiner puts on NodeClaims while it disrupts them (declared in the API package, where
// other controllers read them too).
const (
	// CommandAnnotationKey on a candidate NodeClaim names the command disrupting it.
	CommandAnnotationKey = karpv1.DisruptionCommandAnnotationKey
	// CommandStartedAnnotationKey on a candidate NodeClaim is when its command started (RFC 3339).
	CommandStartedAnnotationKey = karpv1.DisruptionStartedAnnotationKey
	// ReplacementsAnnotationKey on a candidate NodeClaim is how many replacements its command
	// launches.
	ReplacementsAnnotationKey = karpv1.DisruptionReplacementsAnnotationKey
	// ReplacementForAnnotationKey on a replacement NodeClaim names the command that launched it.
	ReplacementForAnnotationKey = karpv1.DisruptionReplacementForAnnotationKey
)

// Cluster is what one disruption pass reads.
type Cluster struct {
	// Now is the time of the pass.
	Now time.Time
	// Input is the provisioner's scheduling input for the same state (state.BuildInput):
	// the pending pods (restricted by Tenancy), the existing nodes, the usable NodePools with
	// their instance types and remaining limits, and the DaemonSet pods. Simulations start from it.
	Input scheduling.Input
	// Tenancy is the NodePool tenancy of the same state: every pod a simulation moves off a node
	// goes through its Restrict first, as the pending pods did in state.BuildInput, so that no
	// replacement serves a pod of a namespace that is not bound to its NodePool. nil binds
	// nothing.
	Tenancy *state.Tenancy
	// Nodes are the Nodes with their NodeClaim (nil for a Node Joiner does not manage) and the pods
	// bound to them.
	Nodes []*Node
	// NodePools are every NodePool by name, usable or not.
	NodePools map[string]*karpv1.NodePool
	// PDBs are the PodDisruptionBudgets.
	PDBs []policyv1.PodDisruptionBudget
	// RecentlyMoved maps the controller (owner) UID of pods a disruption moved to when it moved
	// them; the churn guard leaves their new pods alone for a cooling period.
	RecentlyMoved map[types.UID]time.Time
	// InQueue names the NodeClaims of commands the orchestration queue holds in memory and that
	// may not carry their annotation yet.
	InQueue map[string]bool
}

// Node is a Node with its NodeClaim and pods.
type Node struct {
	Node      *corev1.Node
	NodeClaim *karpv1.NodeClaim
	Pods      []*corev1.Pod
}

// Name is the Node's name.
func (n *Node) Name() string { return n.Node.Name }

// NodePoolName is the node's karpenter.sh/nodepool label.
func (n *Node) NodePoolName() string { return n.Node.Labels[karpv1.NodePoolLabelKey] }

// Initialized reports whether the NodeClaim is Initialized.
func (n *Node) Initialized() bool {
	return n.NodeClaim != nil && meta.IsStatusConditionTrue(n.NodeClaim.Status.Conditions, karpv1.ConditionTypeInitialized)
}

// Deleting reports whether the Node or its NodeClaim is being deleted, or its instance is being
// terminated.
func (n *Node) Deleting() bool {
	if n.Node.DeletionTimestamp != nil {
		return true
	}
	if n.NodeClaim == nil {
		return false
	}
	return n.NodeClaim.DeletionTimestamp != nil || meta.IsStatusConditionTrue(n.NodeClaim.Status.Conditions, karpv1.ConditionTypeInstanceTerminating)
}

// InCommand reports whether a disruption command holds the node.
func (n *Node) InCommand(inQueue map[string]bool) bool {
	if n.NodeClaim == nil {
		return false
	}
	return n.NodeClaim.Annotations[CommandAnnotationKey] != "" || inQueue[n.NodeClaim.Name]
}

// NewCluster builds the Cluster of a pass from what the provisioner read and the scheduling input
// it built from it. Nodes are matched to NodeClaims by provider ID.
func NewCluster(now time.Time, snapshot *state.ClusterState, in scheduling.Input, pdbs []policyv1.PodDisruptionBudget) *Cluster {
	c := &Cluster{Now: now, Input: in, Tenancy: snapshot.Tenancy(), NodePools: map[string]*karpv1.NodePool{}, PDBs: pdbs}
	for i := range snapshot.NodePools {
		c.NodePools[snapshot.NodePools[i].Name] = &snapshot.NodePools[i]
	}
	claims := map[string]*karpv1.NodeClaim{}
	for i := range snapshot.NodeClaims {
		if id := snapshot.NodeClaims[i].Status.ProviderID; id != "" {
			claims[id] = &snapshot.NodeClaims[i]
		}
	}
	pods := map[string][]*corev1.Pod{}
	for i := range snapshot.Pods {
		if name := snapshot.Pods[i].Spec.NodeName; name != "" {
			pods[name] = append(pods[name], &snapshot.Pods[i])
		}
	}
	for i := range snapshot.Nodes {
		node := &snapshot.Nodes[i]
		c.Nodes = append(c.Nodes, &Node{Node: node, NodeClaim: claims[node.Spec.ProviderID], Pods: pods[node.Name]})
	}
	return c
}

// instanceTypes returns the instance types of the usable NodePool, nil when it is not usable.
func (c *Cluster) instanceTypes(nodePool string) []*cloudprovider.InstanceType {
	for _, np := range c.Input.NodePools {
		if np.NodePool.Name == nodePool {
			return np.InstanceTypes
		}
	}
	return nil
}

// nodeInfo is what a pass knows of one managed node: its offering's price and what disrupting it
// would cost.
type nodeInfo struct {
	node          *Node
	nodePool      *karpv1.NodePool
	instanceType  *cloudprovider.InstanceType
	price         float64
	reschedulable []*corev1.Pod
	cost          float64
	// idle is the price of what the node leaves unused: price × (1 − the mean of its cpu and
	// memory shares requested by its pods); newPass sets it from the scheduler's view of the node.
	idle float64
}

// describe computes the price and disruption cost of a managed node. The price is that of the
// offering matching the node's zone and capacity type, 0 when none does. Its reschedulable pods
// are restricted to their namespace's NodePools (Tenancy), as every simulation must see them.
func (c *Cluster) describe(n *Node) *nodeInfo {
	info := &nodeInfo{node: n, nodePool: c.NodePools[n.NodePoolName()]}
	for _, it := range c.instanceTypes(n.NodePoolName()) {
		if it.Name == n.Node.Labels[karpv1.LabelInstanceType] {
			info.instanceType = it
			break
		}
	}
	if info.instanceType != nil {
		zone, ct := n.Node.Labels[karpv1.LabelTopologyZone], n.Node.Labels[karpv1.CapacityTypeLabelKey]
		for _, o := range info.instanceType.Offerings {
			if o.Zone() == zone && o.CapacityType() == ct {
				info.price = o.Price
				break
			}
		}
	}
	for _, pod := range n.Pods {
		if IsReschedulable(pod) {
			info.reschedulable = append(info.reschedulable, c.Tenancy.Restrict(pod))
		}
	}
	info.cost = DisruptionCost(info.reschedulable)
	return info
}

// disrupting reports whether the node counts against its NodePool's budgets: NotReady, being
// deleted, or held by a disruption command.
func (c *Cluster) disrupting(n *Node) bool {
	return !nodepredicates.NodeReady(n.Node) || n.Deleting() || n.InCommand(c.InQueue)
}
