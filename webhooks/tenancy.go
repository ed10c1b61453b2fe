package webhooks

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Tenancy binding of namespaces to NodePools.
const (
	// NodePoolsAnnotation on a Namespace lists, comma-separated, the NodePools its Pods must run on:
	// joiner.dev/nodepools: "team-a,team-a-gpu". A namespace with at least one name is bound.
	NodePoolsAnnotation = "joiner.dev/nodepools"
	// BoundLabel with the value BoundLabelValue marks a bound Namespace so that the Pod webhooks'
	// namespaceSelector sends only its Pods. The handlers themselves go by NodePoolsAnnotation.
	BoundLabel = "joiner.dev/nodepools"
	// BoundLabelValue is the value of BoundLabel on bound namespaces.
	BoundLabelValue = "bound"
)

// BoundNodePools returns the NodePools a namespace is bound to, from its NodePoolsAnnotation: names
// trimmed, empty ones dropped, duplicates removed, in the order written. A nil namespace, or one without
// the annotation, is not bound.
func BoundNodePools(ns *corev1.Namespace) []string {
	if ns == nil {
		return nil
	}
	value, ok := ns.Annotations[NodePoolsAnnotation]
	if !ok {
		return nil
	}
	var pools []string
	for name := range strings.SplitSeq(value, ",") {
		name = strings.TrimSpace(name)
		if name != "" && !slices.Contains(pools, name) {
			pools = append(pools, name)
		}
	}
	return pools
}

// readNamespace returns the named Namespace, or nil when it does not exist.
func readNamespace(ctx context.Context, reader client.Reader, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	err := reader.Get(ctx, client.ObjectKey{Name: name}, ns)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read namespace %q: %w", name, err)
	}
	return ns, nil
}

// poolTaint is a taint of a NodePool's nodes.
type poolTaint struct {
	pool  string
	taint corev1.Taint
}

func sameTaint(a, b corev1.Taint) bool {
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect
}

// nodePoolTaints returns the taints (not the startup taints: Pods need not tolerate those) of the nodes of
// a NodePool.
func nodePoolTaints(np *karpv1.NodePool) []corev1.Taint {
	return karpv1.TaintsToCore(np.Spec.Template.Spec.Taints)
}

// tolerationMap is the JSON form of a toleration that tolerates exactly taint.
func tolerationMap(taint corev1.Taint) map[string]any {
	t := map[string]any{"key": taint.Key, "effect": string(taint.Effect)}
	if taint.Value == "" {
		t["operator"] = string(corev1.TolerationOpExists)
	} else {
		t["operator"] = string(corev1.TolerationOpEqual)
		t["value"] = taint.Value
	}
	return t
}

// poolList renders NodePool names for messages: "team-a, team-a-gpu".
func poolList(pools []string) string {
	return strings.Join(pools, ", ")
}
