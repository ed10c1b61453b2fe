package nodeclaim

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
)

// Condition reasons of the registration stage.
const (
	// ReasonRegistered is the reason of Registered=True.
	ReasonRegistered = "Registered"
	// ReasonNodeNotFound is the reason of Registered=Unknown while no Node has the provider ID.
	ReasonNodeNotFound = "NodeNotFound"
	// ReasonMultipleNodesFound is the reason of Registered=False when several Nodes claim the
	// provider ID; a human has to remove the wrong one.
	ReasonMultipleNodesFound = "MultipleNodesFound"
	// ReasonNodeTerminating is the reason of Registered=Unknown while the matching Node is being
	// deleted.
	ReasonNodeTerminating = "NodeTerminating"
)

// registration finds the Node that joined with the NodeClaim's provider ID and takes it over:
// NodeClaim labels, annotations and taints are synced to it, the NodeClaim becomes its owner, the
// termination finalizer is added, and the karpenter.sh/unregistered taint is removed.
type registration struct {
	kube     client.Client
	clock    clock.Clock
	recorder events.EventRecorder
	metrics  *Metrics
}

// Reconcile registers a Launched NodeClaim once its Node exists.
func (r *registration) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if !isTrue(nc, karpv1.ConditionTypeLaunched) || isTrue(nc, karpv1.ConditionTypeRegistered) {
		return reconcile.Result{}, nil
	}
	now := r.clock.Now()
	nodes, err := fieldindex.NodesForProviderID(ctx, r.kube, nc.Status.ProviderID)
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("register nodeclaim %s: %w", nc.Name, err)
	}
	switch {
	case len(nodes) == 0:
		nc.SetCondition(now, karpv1.ConditionTypeRegistered, metav1.ConditionUnknown, ReasonNodeNotFound,
			fmt.Sprintf("no Node with spec.providerID %s has joined the cluster yet", nc.Status.ProviderID))
		return reconcile.Result{}, nil
	case len(nodes) > 1:
		names := make([]string, len(nodes))
		for i := range nodes {
			names[i] = nodes[i].Name
		}
		nc.SetCondition(now, karpv1.ConditionTypeRegistered, metav1.ConditionFalse, ReasonMultipleNodesFound,
			fmt.Sprintf("Nodes %v all have spec.providerID %s; delete the ones that do not belong to this NodeClaim", names, nc.Status.ProviderID))
		return reconcile.Result{}, nil
	}
	node := &nodes[0]
	if !node.DeletionTimestamp.IsZero() {
		nc.SetCondition(now, karpv1.ConditionTypeRegistered, metav1.ConditionUnknown, ReasonNodeTerminating,
			fmt.Sprintf("Node %s is being deleted", node.Name))
		return reconcile.Result{}, nil
	}
	stored := node.DeepCopy()
	syncNode(nc, node)
	if !equality.Semantic.DeepEqual(stored.ObjectMeta, node.ObjectMeta) || !equality.Semantic.DeepEqual(stored.Spec, node.Spec) {
		if err := r.kube.Patch(ctx, node, client.MergeFromWithOptions(stored, client.MergeFromWithOptimisticLock{})); err != nil {
			return reconcile.Result{}, fmt.Errorf("register nodeclaim %s: sync node %s: %w", nc.Name, node.Name, err)
		}
	}
	nc.Status.NodeName = node.Name
	nc.SetCondition(now, karpv1.ConditionTypeRegistered, metav1.ConditionTrue, ReasonRegistered, "")
	r.metrics.nodeCreated(node)
	r.recorder.Eventf(nc, node, corev1.EventTypeNormal, ReasonRegistered, "Register", "Node %s registered", node.Name)
	return reconcile.Result{}, nil
}

// syncNode makes node carry what registration promises: the NodeClaim's labels and annotations,
// label karpenter.sh/registered=true, the NodeClaim as owner, the termination finalizer, the
// NodeClaim's taints and startup taints (unless the Node is labelled
// karpenter.sh/do-not-sync-taints=true), and no karpenter.sh/unregistered taint.
func syncNode(nc *karpv1.NodeClaim, node *corev1.Node) {
	node.Labels = merged(node.Labels, nc.Labels)
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[karpv1.NodeRegisteredLabelKey] = "true"
	node.Annotations = merged(node.Annotations, withoutLastApplied(nc.Annotations))
	controllerutil.AddFinalizer(node, karpv1.TerminationFinalizer)
	if !slices.ContainsFunc(node.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == nc.UID }) {
		node.OwnerReferences = append(node.OwnerReferences, metav1.OwnerReference{
			APIVersion:         karpv1.GroupVersion.String(),
			Kind:               "NodeClaim",
			Name:               nc.Name,
			UID:                nc.UID,
			BlockOwnerDeletion: ptr.To(true),
		})
	}
	if node.Labels[karpv1.DoNotSyncTaintsLabelKey] != "true" {
		for _, t := range append(slices.Clone(nc.Spec.Taints), nc.Spec.StartupTaints...) {
			if !slices.ContainsFunc(node.Spec.Taints, func(n corev1.Taint) bool { return n.Key == t.Key && n.Effect == t.Effect }) {
				node.Spec.Taints = append(node.Spec.Taints, t.ToCore())
			}
		}
	}
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == karpv1.UnregisteredTaintKey
	})
}

// withoutLastApplied drops kubectl's last-applied-configuration, which describes the NodeClaim
// and means nothing on a Node.
func withoutLastApplied(annotations map[string]string) map[string]string {
	if _, ok := annotations[corev1.LastAppliedConfigAnnotation]; !ok {
		return annotations
	}
	out := make(map[string]string, len(annotations))
	for k, v := range annotations {
		if k != corev1.LastAppliedConfigAnnotation {
			out[k] = v
		}
	}
	return out
}
