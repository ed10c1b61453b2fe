package local

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// Get returns the NodeClaim of the instance with the provider ID: the one Create returned (with
// the launch time as creationTimestamp) for instances launched by this process, one made from
// the Node for instances found only through their Node, or one made from the NodeClaim that
// recorded the launch for instances launched before a restart that have no Node yet.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	iid, err := ParseProviderID(providerID)
	if err != nil {
		return nil, cloudprovider.NewNodeClaimNotFoundError(err)
	}
	p.mu.Lock()
	inst := p.instances[providerID]
	_, terminated := p.terminated[providerID]
	if inst == nil && terminated {
		p.mu.Unlock()
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s was terminated", providerID))
	}
	if inst != nil && inst.registeredAt.IsZero() {
		defer p.mu.Unlock()
		return inst.nodeClaim.DeepCopy(), nil
	}
	p.mu.Unlock()

	node, err := p.getNode(ctx, iid.ID)
	if err != nil {
		return nil, fmt.Errorf("get instance %s: %w", providerID, err)
	}
	ours := node != nil && node.Spec.ProviderID == providerID
	if inst != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !ours && p.nodeGoneLocked(inst) {
			return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s terminated: its Node is gone", providerID))
		}
		return inst.nodeClaim.DeepCopy(), nil
	}
	if ours {
		return nodeClaimFromNode(node), nil
	}
	// Launched by an earlier provider (before a restart) and not registered yet: the NodeClaim's
	// launch record says it exists.
	pl, err := p.pendingLaunchOf(ctx, providerID)
	if err != nil {
		return nil, fmt.Errorf("get instance %s: %w", providerID, err)
	}
	if pl != nil {
		p.mu.Lock()
		_, terminated = p.terminated[providerID]
		p.mu.Unlock()
		if !terminated {
			return pl.describe(), nil
		}
	}
	return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("no instance %s", providerID))
}

// List returns a NodeClaim for every running local instance: those this process launched, those
// whose Nodes exist (for instance launched before a restart), and those launched before a restart
// whose NodeClaim recorded the launch but that have no Node yet, ordered by provider ID.
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	pending, err := p.pendingLaunches(ctx)
	if err != nil {
		return nil, fmt.Errorf("list local instances: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := p.kube.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("list local instances: list nodes: %w", err)
	}
	byProviderID := map[string]*corev1.Node{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if strings.HasPrefix(n.Spec.ProviderID, ProviderIDPrefix) {
			byProviderID[n.Spec.ProviderID] = n
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*karpv1.NodeClaim, 0, len(p.instances)+len(byProviderID))
	for pid, inst := range p.instances {
		if _, ok := byProviderID[pid]; !ok && p.nodeGoneLocked(inst) {
			continue
		}
		out = append(out, inst.nodeClaim.DeepCopy())
	}
	for pid, n := range byProviderID {
		if _, ok := p.instances[pid]; ok {
			continue
		}
		if _, ok := p.terminated[pid]; ok {
			continue
		}
		out = append(out, nodeClaimFromNode(n))
	}
	for pid, pl := range pending {
		if _, ok := p.instances[pid]; ok {
			continue
		}
		if _, ok := p.terminated[pid]; ok {
			continue
		}
		if _, ok := byProviderID[pid]; ok {
			continue
		}
		out = append(out, pl.describe())
	}
	slices.SortFunc(out, func(a, b *karpv1.NodeClaim) int { return cmp.Compare(a.Status.ProviderID, b.Status.ProviderID) })
	return out, nil
}

// IsDrifted returns DriftReasonZone when the NodeClaim's LocalNodeClass no longer offers the
// instance's zone (its region or zones changed), DriftReasonNodeClass when the class's hash
// (ResolvedNodeClass.Hash) differs from the one stamped on the NodeClaim at launch under the same hash
// version, and "" otherwise. A change of the registration delay shapes no node and drifts none.
func (p *Provider) IsDrifted(ctx context.Context, nodeClaim *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	class, err := p.nodeClass(ctx, nodeClaim.Spec.NodeClassRef, "nodeclaim "+nodeClaim.Name)
	if err != nil {
		return "", fmt.Errorf("check drift of nodeclaim %s: %w", nodeClaim.Name, err)
	}
	zone := nodeClaim.Labels[karpv1.LabelTopologyZone]
	if iid, err := ParseProviderID(nodeClaim.Status.ProviderID); err == nil {
		if iid.Region != class.Region {
			return DriftReasonZone, nil
		}
		zone = iid.Zone
	}
	if zone != "" && !slices.Contains(class.Zones, zone) {
		return DriftReasonZone, nil
	}
	// Like Karpenter's hashes, the stamp is compared only under the same version, and a NodeClaim
	// without one (launched before stamps existed) never drifts by it.
	hash, ok1 := nodeClaim.Annotations[NodeClassHashAnnotationKey]
	version, ok2 := nodeClaim.Annotations[NodeClassHashVersionAnnotationKey]
	if ok1 && ok2 && version == NodeClassHashVersion && hash != class.Hash() {
		return DriftReasonNodeClass, nil
	}
	return "", nil
}

// nodeGoneLocked reports whether the registered instance's Node has been missing long enough to
// count the instance as terminated, and forgets the instance if so. inst's Node must have been
// found missing by the caller. p.mu must be held.
func (p *Provider) nodeGoneLocked(inst *instance) bool {
	if inst.registeredAt.IsZero() || p.clock.Since(inst.registeredAt) <= nodeGoneGrace {
		return false
	}
	p.log.Info("instance terminated: its Node is gone", "providerID", inst.providerID)
	p.forgetLocked(inst.providerID)
	return true
}

// forgetLocked drops the instance record, stops its registration and remembers that the
// instance is terminated. p.mu must be held.
func (p *Provider) forgetLocked(pid string) {
	if inst, ok := p.instances[pid]; ok {
		delete(p.instances, pid)
		if !inst.deleted {
			inst.deleted = true
			close(inst.stop)
		}
	}
	now := p.clock.Now()
	for id, at := range p.terminated {
		if now.Sub(at) > terminatedTTL {
			delete(p.terminated, id)
		}
	}
	p.terminated[pid] = now
}

// nodeClaimFromNode describes an instance found only through its Node.
func nodeClaimFromNode(n *corev1.Node) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{}
	nc.CreationTimestamp = n.CreationTimestamp
	for _, ref := range n.OwnerReferences {
		if ref.Kind == "NodeClaim" && strings.HasPrefix(ref.APIVersion, karpv1.Group+"/") {
			nc.Name = ref.Name
		}
	}
	if len(n.Labels) > 0 {
		nc.Labels = make(map[string]string, len(n.Labels))
		for k, v := range n.Labels {
			nc.Labels[k] = v
		}
	}
	nc.Status.ProviderID = n.Spec.ProviderID
	nc.Status.NodeName = n.Name
	nc.Status.Capacity = n.Status.Capacity.DeepCopy()
	nc.Status.Allocatable = n.Status.Allocatable.DeepCopy()
	return nc
}
