package staticpool

import (
	"maps"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// NodeClaim returns a plain template NodeClaim of the NodePool, ready to create: generateName
// "<pool>-"; the template's labels plus karpenter.sh/nodepool; the template's annotations plus the
// template's karpenter.sh/nodepool-hash and karpenter.sh/nodepool-hash-version (so that static
// drift can compare); the template's spec (taints, startup taints, requirements,
// nodeClassRef, terminationGracePeriod, expireAfter) without resource requests; and an owner
// reference to the NodePool that blocks its deletion, so that deleting the NodePool removes it.
//
// Unlike a provisioner NodeClaim it is not narrowed by any pod: the cloud provider picks the
// instance from the template's requirements alone. The result shares nothing with np.
func NodeClaim(np *karpv1.NodePool) *karpv1.NodeClaim {
	tmpl := np.Spec.Template.DeepCopy()
	labels := make(map[string]string, len(tmpl.Labels)+1)
	maps.Copy(labels, tmpl.Labels)
	labels[karpv1.NodePoolLabelKey] = np.Name
	annotations := tmpl.Annotations
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[karpv1.NodePoolHashAnnotationKey] = np.Hash()
	annotations[karpv1.NodePoolHashVersionAnnotationKey] = karpv1.NodePoolHashVersion
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    np.Name + "-",
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: []metav1.OwnerReference{np.OwnerReference()},
		},
		Spec: tmpl.Spec.NodeClaimSpec(),
	}
}
