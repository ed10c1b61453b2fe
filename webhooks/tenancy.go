package webhooks

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/tenancy"
)

// Tenancy binding of namespaces to NodePools; the rule itself lives in package tenancy, which the
// provisioner and the audit share with these handlers.
const (
	// NodePoolsAnnotation on a Namespace lists, comma-separated, the NodePools its Pods must run on
	// (tenancy.NodePoolsAnnotation).
	NodePoolsAnnotation = tenancy.NodePoolsAnnotation
	// BoundLabel with the value BoundLabelValue marks a bound Namespace so that the Pod webhooks'
	// namespaceSelector sends only its Pods (tenancy.BoundLabel).
	BoundLabel = tenancy.BoundLabel
	// BoundLabelValue is the value of BoundLabel on bound namespaces (tenancy.BoundLabelValue).
	BoundLabelValue = tenancy.BoundLabelValue
)

// BoundNodePools returns the NodePools a namespace is bound to; see tenancy.BoundNodePools.
func BoundNodePools(ns *corev1.Namespace) []string {
	return tenancy.BoundNodePools(ns)
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

// sameTaint reports whether a and b are the same taint; see tenancy.SameTaint.
func sameTaint(a, b corev1.Taint) bool {
	return tenancy.SameTaint(a, b)
}

// nodePoolTaints returns the taints (not the startup taints: Pods need not tolerate those) of the nodes of
// a NodePool; see tenancy.Taints.
func nodePoolTaints(np *karpv1.NodePool) []corev1.Taint {
	return tenancy.Taints(np)
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
