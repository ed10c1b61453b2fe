// Package state is the cluster state that provisioning, disruption, static NodePools, drift and the
// NodePool status all read, as a library: the snapshot of pods, nodes, NodeClaims, NodePools,
// namespaces and what says where volumes attach (ReadClusterState), the NodePool usage and limit
// arithmetic (Usage, Remaining, Rollout, NodePoolRemaining), the NodePool tenancy of a snapshot
// (Tenancy), and the scheduler input built from a snapshot (BuildInput), so the provisioner and the
// disruption planner agree on where a pod fits and on which NodePools a pod may use.
//
// It reads through the client it is given and computes; it never writes to the cluster, holds no
// controller and keeps nothing between calls.
package state

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// ClusterState is what one provisioning round (or one disruption pass) reads from the cluster.
type ClusterState struct {
	// Pods are every pod, bound or pending. Read from a cache, they share its objects (the listing
	// does not deep-copy thousands of pods every round): treat them as read-only, and DeepCopy a
	// pod before changing it.
	Pods []corev1.Pod
	// Nodes are every Node, managed or not.
	Nodes []corev1.Node
	// NodeClaims are every NodeClaim, launched or in flight.
	NodeClaims []karpv1.NodeClaim
	// NodePools are every NodePool.
	NodePools []karpv1.NodePool
	// Namespaces are every Namespace; their tenancy.NodePoolsAnnotation binds their pods to
	// NodePools (Tenancy).
	Namespaces []corev1.Namespace
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
		opts []client.ListOption
	}{
		// Every pod, every round: shared with the cache rather than copied (see Pods).
		{&corev1.PodList{}, "pods", []client.ListOption{client.UnsafeDisableDeepCopy}},
		{&corev1.NodeList{}, "nodes", nil}, {&karpv1.NodeClaimList{}, "nodeclaims", nil},
		{&karpv1.NodePoolList{}, "nodepools", nil}, {&appsv1.DaemonSetList{}, "daemonsets", nil},
		{&corev1.PersistentVolumeClaimList{}, "persistentvolumeclaims", nil}, {&corev1.PersistentVolumeList{}, "persistentvolumes", nil},
		{&storagev1.StorageClassList{}, "storageclasses", nil}, {&corev1.NamespaceList{}, "namespaces", nil},
	}
	for _, l := range lists {
		if err := c.List(ctx, l.list, l.opts...); err != nil {
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
	s.Namespaces = lists[8].list.(*corev1.NamespaceList).Items
	return s, nil
}
