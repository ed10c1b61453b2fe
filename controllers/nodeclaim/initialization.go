package nodeclaim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Condition reasons of the initialization stage.
const (
	// ReasonInitialized is the reason of Initialized=True.
	ReasonInitialized = "Initialized"
	// ReasonNodeNotReady is the reason of Initialized=Unknown while the Node is not Ready.
	ReasonNodeNotReady = "NodeNotReady"
	// ReasonStartupTaintsExist is the reason of Initialized=Unknown while startup taints remain.
	ReasonStartupTaintsExist = "StartupTaintsExist"
	// ReasonKnownEphemeralTaintsExist is the reason of Initialized=Unknown while taints that
	// Kubernetes puts on starting nodes remain.
	ReasonKnownEphemeralTaintsExist = "KnownEphemeralTaintsExist"
	// ReasonResourceNotRegistered is the reason of Initialized=Unknown while a requested extended
	// resource is missing from the Node's allocatable.
	ReasonResourceNotRegistered = "ResourceNotRegistered"
)

// knownEphemeralTaints are taints that Kubernetes (or a cloud controller manager) puts on nodes
// while they start, and removes once they are usable.
var knownEphemeralTaints = []corev1.Taint{
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoExecute},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoSchedule},
	{Key: corev1.TaintNodeUnreachable, Effect: corev1.TaintEffectNoExecute},
	{Key: "node.cloudprovider.kubernetes.io/uninitialized", Effect: corev1.TaintEffectNoSchedule},
	karpv1.UnregisteredNoExecuteTaint(),
}

// initialization marks a Registered NodeClaim Initialized once its Node can take the pods it was
// launched for, and labels the Node karpenter.sh/initialized=true.
type initialization struct {
	kube    client.Client
	clock   clock.Clock
	metrics *Metrics
}

// Reconcile checks the Node and sets Initialized.
func (i *initialization) Reconcile(ctx context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if !isTrue(nc, karpv1.ConditionTypeRegistered) || isTrue(nc, karpv1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	now := i.clock.Now()
	node := &corev1.Node{}
	if err := i.kube.Get(ctx, client.ObjectKey{Name: nc.Status.NodeName}, node); err != nil {
		if apierrors.IsNotFound(err) {
			nc.SetCondition(now, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, ReasonNodeNotFound,
				fmt.Sprintf("Node %s not found", nc.Status.NodeName))
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("initialize nodeclaim %s: get node %s: %w", nc.Name, nc.Status.NodeName, err)
	}
	if reason, message := notInitialized(nc, node); reason != "" {
		nc.SetCondition(now, karpv1.ConditionTypeInitialized, metav1.ConditionUnknown, reason, message)
		return reconcile.Result{}, nil
	}
	if node.Labels[karpv1.NodeInitializedLabelKey] != "true" {
		stored := node.DeepCopy()
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[karpv1.NodeInitializedLabelKey] = "true"
		if err := i.kube.Patch(ctx, node, client.MergeFrom(stored)); err != nil {
			return reconcile.Result{}, fmt.Errorf("initialize nodeclaim %s: label node %s: %w", nc.Name, node.Name, err)
		}
	}
	nc.SetCondition(now, karpv1.ConditionTypeInitialized, metav1.ConditionTrue, ReasonInitialized, "")
	i.metrics.Initialized.WithLabelValues(nodePoolOf(nc)).Inc()
	return reconcile.Result{}, nil
}

// notInitialized returns why the Node cannot count as initialized for the NodeClaim, or "" when
// it can: it must be Ready, free of the NodeClaim's startup taints and of the known ephemeral
// taints, and must offer every extended resource the NodeClaim requested.
func notInitialized(nc *karpv1.NodeClaim, node *corev1.Node) (reason, message string) {
	ready := false
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	if !ready {
		return ReasonNodeNotReady, fmt.Sprintf("Node %s is not Ready", node.Name)
	}
	if left := present(node.Spec.Taints, karpv1.TaintsToCore(nc.Spec.StartupTaints)); len(left) > 0 {
		return ReasonStartupTaintsExist, fmt.Sprintf("Node %s still has startup taints %s", node.Name, taintList(left))
	}
	if left := present(node.Spec.Taints, knownEphemeralTaints); len(left) > 0 {
		return ReasonKnownEphemeralTaintsExist, fmt.Sprintf("Node %s still has taints %s", node.Name, taintList(left))
	}
	var missing []string
	for name := range nc.Spec.Resources.Requests {
		if !isExtendedResource(name) {
			continue
		}
		if q, ok := node.Status.Allocatable[name]; !ok || q.IsZero() {
			missing = append(missing, string(name))
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return ReasonResourceNotRegistered, fmt.Sprintf("Node %s has no allocatable %s yet", node.Name, strings.Join(missing, ", "))
	}
	return "", ""
}

// present returns the taints of want that are on the node (same key and effect).
func present(onNode, want []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, w := range want {
		if slices.ContainsFunc(onNode, func(t corev1.Taint) bool { return t.Key == w.Key && t.Effect == w.Effect }) {
			out = append(out, w)
		}
	}
	return out
}

func taintList(taints []corev1.Taint) string {
	s := make([]string, len(taints))
	for i := range taints {
		s[i] = taints[i].ToString()
	}
	return strings.Join(s, ", ")
}

// isExtendedResource reports whether name is an extended resource (such as nvidia.com/gpu): a
// resource with a domain outside kubernetes.io, and not a quota "requests." name.
func isExtendedResource(name corev1.ResourceName) bool {
	n := string(name)
	domain, _, hasDomain := strings.Cut(n, "/")
	if !hasDomain || strings.HasPrefix(n, "requests.") {
		return false
	}
	return domain != "kubernetes.io" && !strings.HasSuffix(domain, ".kubernetes.io")
}
