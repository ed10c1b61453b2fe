package state

import (
	"context"
	"slices"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/nodepredicates"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

// BuildInput turns the cluster state into a scheduling input: the pending pods that are not
// already nominated to an in-flight NodeClaim, each passed through the snapshot's Tenancy (a pod
// of a bound namespace is only placed on its namespace's NodePools), the existing nodes and in-flight NodeClaims with
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
	tenants := s.Tenancy()
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
			in.Pods = append(in.Pods, tenants.Restrict(pod))
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

	in.NodePools = usableNodePools(ctx, cp, s, log)
	in.DaemonSetPods = daemonSetPods(s)
	return in, nil
}

// usableNodePools returns the NodePools new NodeClaims may come from (not deleting, not static,
// ValidationSucceeded and Ready not False, instance types available), with their instance types
// and remaining limits; it logs why it leaves each other one out.
func usableNodePools(ctx context.Context, cp cloudprovider.CloudProvider, s *ClusterState, log logr.Logger) []scheduling.NodePool {
	var out []scheduling.NodePool
	for i := range s.NodePools {
		np := &s.NodePools[i]
		if !Considered(np) {
			continue
		}
		if c := FailedValidation(np); c != nil {
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
		out = append(out, scheduling.NodePool{
			NodePool:      np,
			InstanceTypes: its,
			Remaining:     NodePoolRemaining(np, s.NodeClaims, its),
		})
	}
	return out
}

// daemonSetPods returns one pod per DaemonSet, from its template.
func daemonSetPods(s *ClusterState) []*corev1.Pod {
	var out []*corev1.Pod
	for i := range s.DaemonSets {
		ds := &s.DaemonSets[i]
		out = append(out, &corev1.Pod{
			ObjectMeta: ds.Spec.Template.ObjectMeta,
			Spec:       ds.Spec.Template.Spec,
		})
	}
	return out
}

// Considered reports whether provisioning launches NodeClaims from the NodePool at all: not while
// it is being deleted, and never for a static NodePool (spec.replicas), which its own controller
// scales.
func Considered(np *karpv1.NodePool) bool {
	return np.DeletionTimestamp == nil && np.Spec.Replicas == nil
}

// FailedValidation returns the NodePool's ValidationSucceeded condition when it is False: its spec
// failed validation, and no capacity is launched from it until it passes. The NodePool controller
// computes the condition.
func FailedValidation(np *karpv1.NodePool) *metav1.Condition {
	if c := np.StatusCondition(karpv1.ConditionTypeValidationSucceeded); c != nil && c.Status == metav1.ConditionFalse {
		return c
	}
	return nil
}
