package provisioning

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/go-logr/logr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/nodepool"
	"github.com/joiner-dev/joiner/controllers/nodepredicates"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

// ClusterState is what one provisioning round (or one disruption pass) reads from the cluster.
type ClusterState struct {
	// Pods are every pod, bound or pending.
	Pods []corev1.Pod
	// Nodes are every Node, managed or not.
	Nodes []corev1.Node
	// NodeClaims are every NodeClaim, launched or in flight.
	NodeClaims []karpv1.NodeClaim
	// NodePools are every NodePool.
	NodePools []karpv1.NodePool
	// DaemonSets are every DaemonSet; each adds its pod to the overhead of new nodes.
	DaemonSets []appsv1.DaemonSet
	// PersistentVolumeClaims, PersistentVolumes and StorageClasses say where pods' volumes can be
	// used (scheduling.Volumes).
	PersistentVolumeClaims []corev1.PersistentVolumeClaim
	PersistentVolumes      []corev1.PersistentVolume
	StorageClasses         []storagev1.StorageClass
}

// ReadClusterState lists what a provisioning round or a disruption pass reads.
func ReadClusterState(ctx context.Context, c client.Reader) (*ClusterState, error) {
	s := &ClusterState{}
	lists := []struct {
		list client.ObjectList
		what string
	}{
		{&corev1.PodList{}, "pods"}, {&corev1.NodeList{}, "nodes"}, {&karpv1.NodeClaimList{}, "nodeclaims"},
		{&karpv1.NodePoolList{}, "nodepools"}, {&appsv1.DaemonSetList{}, "daemonsets"},
		{&corev1.PersistentVolumeClaimList{}, "persistentvolumeclaims"}, {&corev1.PersistentVolumeList{}, "persistentvolumes"},
		{&storagev1.StorageClassList{}, "storageclasses"},
	}
	for _, l := range lists {
		if err := c.List(ctx, l.list); err != nil {
			return nil, fmt.Errorf("list %s: %w", l.what, err)
		}
	}
	s.Pods = lists[0].list.(*corev1.PodList).Items
	s.Nodes = lists[1].list.(*corev1.NodeList).Items
	s.NodeClaims = lists[2].list.(*karpv1.NodeClaimList).Items
	s.NodePools = lists[3].list.(*karpv1.NodePoolList).Items
	s.DaemonSets = lists[4].list.(*appsv1.DaemonSetList).Items
	s.PersistentVolumeClaims = lists[5].list.(*corev1.PersistentVolumeClaimList).Items
	s.PersistentVolumes = lists[6].list.(*corev1.PersistentVolumeList).Items
	s.StorageClasses = lists[7].list.(*storagev1.StorageClassList).Items
	return s, nil
}

// input is BuildInput with the provisioner's provider, options and log.
func (p *Provisioner) input(ctx context.Context, s *ClusterState, nominated map[types.UID]string) (scheduling.Input, error) {
	return BuildInput(ctx, p.CloudProvider, s, nominated, p.Options, p.Log)
}

// BuildInput turns the cluster state into a scheduling input: the pending pods that are not
// already nominated to an in-flight NodeClaim, the existing nodes and in-flight NodeClaims with
// the pods bound or nominated to them (nodes and NodeClaims being deleted are left out), the usable
// NodePools (not deleting, not static, ValidationSucceeded and Ready not False, instance types
// available) with their instance types and remaining limits, one pod per DaemonSet, and the
// claims, volumes and StorageClasses that say where pods' volumes can be used. The
// provisioner and the disruption controller both simulate from it, so they agree on where a pod
// fits.
func BuildInput(ctx context.Context, cp cloudprovider.CloudProvider, s *ClusterState, nominated map[types.UID]string, opts scheduling.Options, log logr.Logger) (scheduling.Input, error) {
	in := scheduling.Input{Options: opts, Volumes: scheduling.NewVolumes(s.PersistentVolumeClaims, s.PersistentVolumes, s.StorageClasses)}
	claims := map[string]*karpv1.NodeClaim{}
	claimByProviderID := map[string]*karpv1.NodeClaim{}
	for i := range s.NodeClaims {
		nc := &s.NodeClaims[i]
		claims[nc.Name] = nc
		if nc.Status.ProviderID != "" {
			claimByProviderID[nc.Status.ProviderID] = nc
		}
	}
	bound := map[string][]*corev1.Pod{}
	byClaim := map[string][]*corev1.Pod{}
	for i := range s.Pods {
		pod := &s.Pods[i]
		if podpredicates.IsTerminal(pod) {
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
		if podpredicates.IsProvisionable(pod) {
			in.Pods = append(in.Pods, pod)
		}
	}

	registered := map[string]bool{}
	for i := range s.Nodes {
		node := &s.Nodes[i]
		if node.DeletionTimestamp != nil {
			continue
		}
		nc := claimByProviderID[node.Spec.ProviderID]
		pods := bound[node.Name]
		initialized := nodepredicates.NodeReady(node)
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
	for i := range s.NodeClaims {
		nc := &s.NodeClaims[i]
		if registered[nc.Name] || nc.DeletionTimestamp != nil {
			continue
		}
		in.ExistingNodes = append(in.ExistingNodes, scheduling.NewInFlightNodeClaim(nc, byClaim[nc.Name]))
	}

	for i := range s.NodePools {
		np := &s.NodePools[i]
		if !considered(np) {
			continue
		}
		if c := failedValidation(np); c != nil {
			log.V(1).Info("ignoring NodePool, its validation failed", "nodepool", np.Name, "reason", c.Reason, "message", c.Message)
			continue
		}
		if c := meta.FindStatusCondition(np.Status.Conditions, karpv1.ConditionTypeReady); c != nil && c.Status == "False" {
			log.V(1).Info("ignoring NodePool, not ready", "nodepool", np.Name, "reason", c.Reason)
			continue
		}
		its, err := cp.GetInstanceTypes(ctx, np)
		if err != nil {
			log.Info("ignoring NodePool, its instance types are unavailable", "nodepool", np.Name, "error", err.Error())
			continue
		}
		in.NodePools = append(in.NodePools, scheduling.NodePool{
			NodePool:      np,
			InstanceTypes: its,
			Remaining:     remaining(np, s.NodeClaims, its),
		})
	}
	for i := range s.DaemonSets {
		ds := &s.DaemonSets[i]
		in.DaemonSetPods = append(in.DaemonSetPods, &corev1.Pod{
			ObjectMeta: ds.Spec.Template.ObjectMeta,
			Spec:       ds.Spec.Template.Spec,
		})
	}
	return in, nil
}

// considered reports whether provisioning launches NodeClaims from the NodePool at all: not while
// it is being deleted, and never for a static NodePool (spec.replicas), which its own controller
// scales.
func considered(np *karpv1.NodePool) bool {
	return np.DeletionTimestamp == nil && np.Spec.Replicas == nil
}

// failedValidation returns the NodePool's ValidationSucceeded condition when it is False: its spec
// failed validation, and no capacity is launched from it until it passes. The NodePool controller
// computes the condition.
func failedValidation(np *karpv1.NodePool) *metav1.Condition {
	if c := np.StatusCondition(karpv1.ConditionTypeValidationSucceeded); c != nil && c.Status == metav1.ConditionFalse {
		return c
	}
	return nil
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
