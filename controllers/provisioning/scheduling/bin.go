package scheduling

import (
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/topology"
)

// bin is a node pods can be placed on: an existing node or in-flight NodeClaim (existing set), or
// a NodeClaim planned in this simulation (tmpl set).
type bin struct {
	// id is the bin's position in solver.bins; -1 for a template's prospective NodeClaim
	// (solver.fresh), which gets an id when a pod opens it.
	id       int32
	existing *ExistingNode
	tmpl     *template
	hostname string
	// reqs is what the node's labels may be: its labels for an existing node, the template's
	// requirements narrowed by the pods for a planned NodeClaim (without the hostname).
	reqs requirements.Requirements
	// spec is, for a planned NodeClaim, the NodeClaim spec requirements so far.
	spec requirements.Requirements
	// domains is the fixed domain per topology key, -1 while open.
	domains []int32
	// used is what the node's pods (and, for a planned NodeClaim, DaemonSets) request.
	used resources.Vec
	// capacity is the allocatable capacity of an existing node.
	capacity resources.Vec
	// opts, first and price: for a planned NodeClaim, its instance-type options, the index of
	// the cheapest that fits used, and that option's price.
	opts       *optionSet
	first      int
	price      float64
	budget     float64 // for a planned NodeClaim, the price its packing aims at (sizing.go)
	taints     []corev1.Taint
	ports      []hostPort
	counts     []topology.GroupCount // hostname groups: pods selected
	owners     []topology.GroupCount // hostname groups: hard owners
	placed     []*podInfo            // pods placed by this simulation, in order
	basePorts  []hostPort            // host ports of the pods already on an existing node
	minRelaxed bool
}

// pods returns the pods placed on the bin.
func (b *bin) pods() []*corev1.Pod {
	out := make([]*corev1.Pod, len(b.placed))
	for i, p := range b.placed {
		out[i] = p.pod
	}
	return out
}

func (b *bin) isNew() bool { return b.tmpl != nil }

// rank orders bins of equal marginal price: initialized existing nodes, other existing nodes,
// planned NodeClaims, then a NodeClaim not yet planned.
func (b *bin) rank() int {
	switch {
	case b.existing != nil && b.existing.Initialized:
		return 0
	case b.existing != nil:
		return 1
	case b.id >= 0:
		return 2
	}
	return 3
}

// ephemeralTaintKeys are taints a starting node carries that go away by themselves.
var ephemeralTaintKeys = map[string]bool{
	karpv1.UnregisteredTaintKey:                      true,
	corev1.TaintNodeNotReady:                         true,
	corev1.TaintNodeUnreachable:                      true,
	corev1.TaintNodeNetworkUnavailable:               true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
}

// NewExistingNode describes a node and its pods for the simulation. On a node that is not yet
// initialized, the startup taints (given by the NodeClaim, may be nil) and the taints a starting
// node carries (not-ready, unreachable, network-unavailable, cloud-provider uninitialized,
// karpenter.sh/unregistered) are left out, since they will be removed.
func NewExistingNode(node *corev1.Node, pods []*corev1.Pod, nodePool string, initialized bool, startupTaints []corev1.Taint) *ExistingNode {
	var taints []corev1.Taint
	for _, t := range node.Spec.Taints {
		if !initialized && (ephemeralTaintKeys[t.Key] || hasTaint(startupTaints, t)) {
			continue
		}
		taints = append(taints, t)
	}
	return &ExistingNode{
		Name:        node.Name,
		Labels:      node.Labels,
		Taints:      taints,
		Allocatable: node.Status.Allocatable,
		Pods:        pods,
		NodePool:    nodePool,
		Initialized: initialized,
	}
}

// NewInFlightNodeClaim describes a launched NodeClaim whose node has not registered yet: its
// labels and status.allocatable, and its spec taints (startup taints left out).
func NewInFlightNodeClaim(nc *karpv1.NodeClaim, pods []*corev1.Pod) *ExistingNode {
	name := nc.Status.NodeName
	if name == "" {
		name = nc.Name
	}
	alloc := nc.Status.Allocatable
	if alloc == nil {
		alloc = nc.Spec.Resources.Requests
	}
	return &ExistingNode{
		Name:        name,
		Labels:      nc.Labels,
		Taints:      karpv1.TaintsToCore(nc.Spec.Taints),
		Allocatable: alloc,
		Pods:        pods,
		NodePool:    nc.Labels[karpv1.NodePoolLabelKey],
	}
}

func hasTaint(taints []corev1.Taint, t corev1.Taint) bool {
	for _, s := range taints {
		if s.Key == t.Key && s.Effect == t.Effect && s.Value == t.Value {
			return true
		}
	}
	return false
}
