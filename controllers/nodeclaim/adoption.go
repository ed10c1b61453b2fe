package nodeclaim

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// OriginAnnotationKey records on a NodeClaim how Joiner came to manage it: OriginLaunched when
// Joiner launched its instance, OriginAdopted when Joiner found it launched already (by Karpenter,
// before Joiner took the cluster over) and took it over. Karpenter ignores it.
const OriginAnnotationKey = "joiner.dev/origin"

// Values of OriginAnnotationKey.
const (
	// OriginLaunched: Joiner's launch stage created the NodeClaim's instance.
	OriginLaunched = "launched"
	// OriginAdopted: the NodeClaim had an instance (status.providerID) before Joiner first saw it.
	OriginAdopted = "adopted"
)

// ReasonAdopted is the reason of the Normal Event on a NodeClaim Joiner adopted.
const ReasonAdopted = "Adopted"

// adoption marks the NodeClaims Joiner did not launch: a NodeClaim without OriginAnnotationKey
// whose status already names an instance was launched by another controller (the Karpenter whose
// cluster Joiner took over), and is marked OriginAdopted. From then on it is managed as Joiner's
// own: the later stages skip what is done already (Launched, Registered, Initialized), and
// disruption, expiration, drift and termination treat it like any other. The controller reports
// the adoption once the mark is written (report).
type adoption struct{}

// Reconcile marks a NodeClaim launched before Joiner managed it.
func (adoption) Reconcile(_ context.Context, nc *karpv1.NodeClaim) (reconcile.Result, error) {
	if _, ok := nc.Annotations[OriginAnnotationKey]; ok || nc.Status.ProviderID == "" {
		return reconcile.Result{}, nil
	}
	nc.Annotations = merged(nc.Annotations, map[string]string{OriginAnnotationKey: OriginAdopted})
	return reconcile.Result{}, nil
}

// adopted reports whether the pass that turned stored into nc adopted the NodeClaim.
func adopted(stored, nc *karpv1.NodeClaim) bool {
	_, had := stored.Annotations[OriginAnnotationKey]
	return !had && nc.Annotations[OriginAnnotationKey] == OriginAdopted
}

// reportAdoption records an adoption, once its mark is stored: a Normal Event (ReasonAdopted) on
// the NodeClaim, a log entry and joiner_nodeclaims_adopted_total.
func reportAdoption(ctx context.Context, recorder events.EventRecorder, m *Metrics, nc *karpv1.NodeClaim) {
	node := nc.Status.NodeName
	if node == "" {
		node = "(none registered yet)"
	}
	recorder.Eventf(nc, nil, corev1.EventTypeNormal, ReasonAdopted, "Adopt",
		"Adopted NodeClaim launched before Joiner managed it (by Karpenter): instance %s, Node %s; Joiner now disrupts and terminates it like its own",
		nc.Status.ProviderID, node)
	log.FromContext(ctx).Info("adopted nodeclaim launched before joiner managed it", "nodeclaim", nc.Name, "nodepool", nodePoolOf(nc),
		"providerID", nc.Status.ProviderID, "node", nc.Status.NodeName)
	m.Adopted.WithLabelValues(nodePoolOf(nc)).Inc()
}
