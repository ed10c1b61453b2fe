package provisioning

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/nodepool"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

// clusterState is what one provisioning round reads from the cluster.
type clusterState struct {
	pods       []corev1.Pod
	nodes      []corev1.Node
	nodeClaims []karpv1.NodeClaim
	nodePools  []karpv1.NodePool
	daemonSets []appsv1.DaemonSet
}

func (p *Provisioner) readState(ctx context.Context) (*clusterState, error) {
	s := &clusterState{}
	lists := []struct {
		list client.ObjectList
		what string
	}{
		{&corev1.PodList{}, "pods"}, {&corev1.NodeList{}, "nodes"}, {&karpv1.NodeClaimList{}, "nodeclaims"},
		{&karpv1.NodePoolList{}, "nodepools"}, {&appsv1.DaemonSetList{}, "daemonsets"},
	}
	for _, l := range lists {
		if err := p.Client.List(ctx, l.list); err != nil {
			return nil, fmt.Errorf("list %s: %w", l.what, err)
		}
	}
	s.pods = lists[0].list.(*corev1.PodList).Items
	s.nodes = lists[1].list.(*corev1.NodeList).Items
	s.nodeClaims = lists[2].list.(*karpv1.NodeClaimList).Items
	s.nodePools = lists[3].list.(*karpv1.NodePoolList).Items
	s.daemonSets = lists[4].list.(*appsv1.DaemonSetList).Items
	return s, nil
}

// input turns the cluster state into a scheduling input: the pending pods that are not already
// nominated to an in-flight NodeClaim, the existing nodes and in-flight NodeClaims with the pods
// bound or nominated to them, the usable NodePools with their instance types and remaining limits,
// and one pod per DaemonSet.
func (p *Provisioner) input(ctx context.Context, s *clusterState, nominated map[types.UID]string) (scheduling.Input, error) {
	in := scheduling.Input{Options: p.Options}
	claims := map[string]*karpv1.NodeClaim{}
	claimByProviderID := map[string]*karpv1.NodeClaim{}
	for i := range s.nodeClaims {
		nc := &s.nodeClaims[i]
		claims[nc.Name] = nc
		if nc.Status.ProviderID != "" {
			claimByProviderID[nc.Status.ProviderID] = nc
		}
	}
	bound := map[string][]*corev1.Pod{}
	byClaim := map[string][]*corev1.Pod{}
	for i := range s.pods {
		pod := &s.pods[i]
		if isTerminal(pod) {
			continue
		}
		if pod.Spec.NodeName != "" {
			bound[pod.Spec.NodeName] = append(bound[pod.Spec.NodeName], pod)
			continue
		}
		if name, ok := nominated[pod.UID]; ok && claims[name] != nil {
			byClaim[name] = append(byClaim[name], pod)
			continue
		}
		if IsProvisionable(pod) {
			in.Pods = append(in.Pods, pod)
		}
	}

	registered := map[string]bool{}
	for i := range s.nodes {
		node := &s.nodes[i]
		if node.DeletionTimestamp != nil {
			continue
		}
		nc := claimByProviderID[node.Spec.ProviderID]
		pods := bound[node.Name]
		initialized := nodeReady(node)
		var startupTaints []corev1.Taint
		nodePool := node.Labels[karpv1.NodePoolLabelKey]
		if nc != nil {
			registered[nc.Name] = true
			if nc.DeletionTimestamp != nil {
				continue
			}
			pods = append(slices.Clone(pods), byClaim[nc.Name]...)
			initialized = meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized)
			startupTaints = karpv1.TaintsToCore(nc.Spec.StartupTaints)
		}
		in.ExistingNodes = append(in.ExistingNodes, scheduling.NewExistingNode(node, pods, nodePool, initialized, startupTaints))
	}
	for i := range s.nodeClaims {
		nc := &s.nodeClaims[i]
		if registered[nc.Name] || nc.DeletionTimestamp != nil {
			continue
		}
		in.ExistingNodes = append(in.ExistingNodes, scheduling.NewInFlightNodeClaim(nc, byClaim[nc.Name]))
	}

	for i := range s.nodePools {
		np := &s.nodePools[i]
		if np.DeletionTimestamp != nil || np.Spec.Replicas != nil {
			continue
		}
		if c := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeReady); c != nil && c.Status == "False" {
			p.Log.V(1).Info("ignoring NodePool, not ready", "nodepool", np.Name, "reason", c.Reason)
			continue
		}
		its, err := p.CloudProvider.GetInstanceTypes(ctx, np)
		if err != nil {
			p.Log.Info("ignoring NodePool, its instance types are unavailable", "nodepool", np.Name, "error", err.Error())
			continue
		}
		in.NodePools = append(in.NodePools, scheduling.NodePool{
			NodePool:      np,
			InstanceTypes: its,
			Remaining:     remaining(np, s.nodeClaims, its),
		})
	}
	for i := range s.daemonSets {
		ds := &s.daemonSets[i]
		in.DaemonSetPods = append(in.DaemonSetPods, &corev1.Pod{
			ObjectMeta: ds.Spec.Template.ObjectMeta,
			Spec:       ds.Spec.Template.Spec,
		})
	}
	return in, nil
}

// remaining is what is left of a NodePool's limits after its NodeClaims, launched or in flight.
// A launched NodeClaim counts its capacity; one not launched yet counts the largest capacity among
// its instance-type options, so that limits hold whatever the launch picks.
func remaining(np *karpv1.NodePool, claims []karpv1.NodeClaim, its []*cloudprovider.InstanceType) corev1.ResourceList {
	if len(np.Spec.Limits) == 0 {
		return nil
	}
	byName := map[string]*cloudprovider.InstanceType{}
	for _, it := range its {
		byName[it.Name] = it
	}
	var own []karpv1.NodeClaim
	for i := range claims {
		if claims[i].Labels[karpv1.NodePoolLabelKey] == np.Name {
			own = append(own, claims[i])
		}
	}
	usage := nodepool.Usage(own, func(nc *karpv1.NodeClaim) corev1.ResourceList { return largestOption(nc, byName) })
	return nodepool.Remaining(np.Spec.Limits, usage)
}

// largestOption returns, per resource, the largest capacity among the NodeClaim's instance-type
// options (its node.kubernetes.io/instance-type In requirement).
func largestOption(nc *karpv1.NodeClaim, byName map[string]*cloudprovider.InstanceType) corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, r := range nc.Spec.Requirements {
		if r.Key != corev1.LabelInstanceTypeStable || r.Operator != corev1.NodeSelectorOpIn {
			continue
		}
		for _, name := range r.Values {
			it := byName[name]
			if it == nil {
				continue
			}
			for res, q := range it.Capacity {
				if cur, ok := out[res]; !ok || q.Cmp(cur) > 0 {
					out[res] = q.DeepCopy()
				}
			}
		}
	}
	if len(out) == 0 {
		return nc.Spec.Resources.Requests
	}
	return out
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
