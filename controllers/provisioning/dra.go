package provisioning

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/controllers/provisioning/dra"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/controllers/state"
)

// draRound is what DRA-aware packing (Options.ModelDRARequests) did to one round's input.
type draRound struct {
	// added are the extended resources that stand for each modelled pod's claims, by pod UID.
	added map[types.UID]corev1.ResourceList
	// refused counts the pending pods left out because a claim could not be modelled.
	refused int
}

// modelDRA applies the pending pods' ResourceClaims to in (package dra) when ModelDRARequests is
// set and some pending pod has claims; otherwise it changes nothing and claims are ignored, as
// Karpenter's IGNORE_DRA_REQUESTS=true does. A pod whose claims are modelled is simulated with
// their devices as extended-resource requests (in its overhead), so it only lands on instance
// types, in-flight NodeClaims or nodes with enough of them. Every other pod with claims is left
// out of the round with a FailedProvisioning Event naming the claim and why: no capacity is
// launched for it. The existing nodes' device room is set from their NodeClaims (deviceRoom).
func (p *Provisioner) modelDRA(ctx context.Context, in *scheduling.Input, s *state.ClusterState) draRound {
	r := draRound{added: map[types.UID]corev1.ResourceList{}}
	if !p.modelDRARequests || !slices.ContainsFunc(in.Pods, dra.HasClaims) {
		return r
	}
	objs, err := p.readDRA(ctx, s)
	if err != nil {
		p.Log.Error(err, "read DRA objects; no capacity is launched this round for pods with resource claims")
	}
	kept := make([]*corev1.Pod, 0, len(in.Pods))
	for _, pod := range in.Pods {
		if !dra.HasClaims(pod) {
			kept = append(kept, pod)
			continue
		}
		if err != nil {
			r.refused++
			p.event(pod, corev1.EventTypeWarning, ReasonFailedProvisioning, "no capacity is launched for this pod: its resource claims could not be read: %v", err)
			continue
		}
		devices, refusal := objs.Model(pod)
		if refusal != nil {
			r.refused++
			p.Log.V(1).Info("pending pod has a resource claim Joiner cannot model; no capacity is launched for it",
				"pod", types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}.String(), "claim", refusal.Claim, "reason", refusal.Reason)
			p.event(pod, corev1.EventTypeWarning, ReasonFailedProvisioning, "no capacity is launched for this pod: %v", refusal)
			continue
		}
		r.added[pod.UID] = devices
		kept = append(kept, withDevices(pod, devices))
	}
	in.Pods = kept
	if objs != nil {
		deviceRoom(in.ExistingNodes, s.NodeClaims, objs)
	}
	return r
}

// readDRA lists the cluster's ResourceClaims, ResourceClaimTemplates and DeviceClasses (through
// the cache) and counts the pods that name each claim.
func (p *Provisioner) readDRA(ctx context.Context, s *state.ClusterState) (*dra.Objects, error) {
	var claims resourcev1.ResourceClaimList
	if err := p.Client.List(ctx, &claims); err != nil {
		return nil, fmt.Errorf("list resourceclaims: %w", err)
	}
	var templates resourcev1.ResourceClaimTemplateList
	if err := p.Client.List(ctx, &templates); err != nil {
		return nil, fmt.Errorf("list resourceclaimtemplates: %w", err)
	}
	var classes resourcev1.DeviceClassList
	if err := p.Client.List(ctx, &classes); err != nil {
		return nil, fmt.Errorf("list deviceclasses: %w", err)
	}
	objs := dra.NewObjects(claims.Items, templates.Items, classes.Items)
	var live []*corev1.Pod
	for i := range s.Pods {
		if !podpredicates.IsTerminal(&s.Pods[i]) {
			live = append(live, &s.Pods[i])
		}
	}
	objs.CountUsers(live)
	return objs, nil
}

// withDevices returns a copy of pod whose overhead also holds devices, so that the simulation asks
// them of the node with the pod's other requests.
func withDevices(pod *corev1.Pod, devices corev1.ResourceList) *corev1.Pod {
	out := pod.DeepCopy()
	out.Spec.Overhead = dra.Add(out.Spec.Overhead, devices)
	return out
}

// deviceRoom sets, on every existing node and in-flight NodeClaim, the room left for the devices
// of the modelled classes: what its Node advertises, or else, for a node whose devices a DRA
// driver publishes as ResourceSlices rather than as an extended resource, what its NodeClaim's
// instance type carries; less the devices the claims of its pods hold, each claim once. nodes'
// elements are replaced, never changed.
func deviceRoom(nodes []*scheduling.ExistingNode, claims []karpv1.NodeClaim, objs *dra.Objects) {
	launched := map[string]corev1.ResourceList{}
	for i := range claims {
		nc := &claims[i]
		launched[nc.Name] = nc.Status.Allocatable
		if nc.Status.NodeName != "" {
			launched[nc.Status.NodeName] = nc.Status.Allocatable
		}
	}
	names := modelledResources(objs)
	for i, n := range nodes {
		used := objs.Usage(n.Pods)
		var alloc corev1.ResourceList
		for _, name := range names {
			base, ok := n.Allocatable[name]
			if !ok || base.IsZero() {
				base = launched[n.Name][name]
			}
			base = base.DeepCopy()
			base.Sub(used[name])
			if base.Sign() < 0 {
				base.Set(0)
			}
			if have, ok := n.Allocatable[name]; (ok || !base.IsZero()) && !have.Equal(base) {
				if alloc == nil {
					alloc = maps.Clone(n.Allocatable)
				}
				alloc[name] = base
			}
		}
		if alloc != nil {
			cp := *n
			cp.Allocatable = alloc
			nodes[i] = &cp
		}
	}
}

// modelledResources are the extended resources the device classes stand for, sorted.
func modelledResources(objs *dra.Objects) []corev1.ResourceName {
	set := map[corev1.ResourceName]bool{}
	for _, name := range objs.Known {
		set[name] = true
	}
	for _, dc := range objs.DeviceClasses {
		if n := dc.Spec.ExtendedResourceName; n != nil && *n != "" {
			set[corev1.ResourceName(*n)] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// strip takes the modelled devices of pods out of the NodeClaim's resource requests: they are
// not the node's extended resources but devices a DRA driver publishes, and the NodeClaim must
// not wait for the Node to advertise them to initialize. Its instance types already have them.
func (r draRound) strip(nc *karpv1.NodeClaim, pods []*corev1.Pod) {
	var devices corev1.ResourceList
	for _, pod := range pods {
		if added := r.added[pod.UID]; added != nil {
			devices = dra.Add(devices, added)
		}
	}
	if devices == nil {
		return
	}
	requests := maps.Clone(nc.Spec.Resources.Requests)
	for name, q := range devices {
		left := requests[name]
		left.Sub(q)
		if left.Sign() <= 0 {
			delete(requests, name)
			continue
		}
		requests[name] = left
	}
	nc.Spec.Resources.Requests = requests
}
