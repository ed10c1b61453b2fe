package v1

import (
	"fmt"
	"time"

	"github.com/mitchellh/hashstructure/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Hash returns the hash of the NodePool's template that static drift compares: the template's
// labels and annotations, and its taints, startup taints, nodeClassRef, terminationGracePeriod and
// expireAfter. It leaves out the requirements (drift compares them as requirements instead) and
// everything outside the template (weight, limits, disruption, replicas), so changing those never
// drifts a node. Taints count as a set (their order does not matter), and unset fields hash like
// absent ones: expireAfter "Never" hashes like an unset expireAfter, as in Karpenter.
//
// The value is the decimal string of a 64-bit hashstructure (FormatV2, SlicesAsSets,
// IgnoreZeroValue, ZeroNil) hash, and it equals Karpenter v1.14's NodePool.Hash() for the same
// template (scheme version NodePoolHashVersion): a cluster that moves from Karpenter to
// Joiner keeps its nodes undrifted.
func (in *NodePool) Hash() string {
	// hashstructure mixes type and field names into the hash, so these types copy Karpenter's
	// (sigs.k8s.io/karpenter/pkg/apis/v1) NodeClaimTemplate, ObjectMeta, NodeClaimTemplateSpec,
	// NodeClassReference and NillableDuration by name, leaving out the fields Karpenter tags
	// `hash:"ignore"` (requirements, and NillableDuration's raw string). Field order does not
	// matter: FormatV2 combines a struct's fields without order.
	type ObjectMeta struct {
		Labels      map[string]string
		Annotations map[string]string
	}
	type NodeClassReference struct {
		Kind  string
		Name  string
		Group string
	}
	type NillableDuration struct {
		Duration *time.Duration
	}
	type NodeClaimTemplateSpec struct {
		Taints                 []corev1.Taint
		StartupTaints          []corev1.Taint
		NodeClassRef           *NodeClassReference
		TerminationGracePeriod *metav1.Duration
		ExpireAfter            NillableDuration
	}
	type NodeClaimTemplate struct {
		ObjectMeta
		Spec NodeClaimTemplateSpec
	}

	tmpl := &in.Spec.Template
	hashed := NodeClaimTemplate{
		ObjectMeta: ObjectMeta{Labels: tmpl.Labels, Annotations: tmpl.Annotations},
		Spec: NodeClaimTemplateSpec{
			Taints:                 TaintsToCore(tmpl.Spec.Taints),
			StartupTaints:          TaintsToCore(tmpl.Spec.StartupTaints),
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
			ExpireAfter:            NillableDuration{Duration: tmpl.Spec.ExpireAfter.Duration},
		},
	}
	if ref := tmpl.Spec.NodeClassRef; ref != nil {
		hashed.Spec.NodeClassRef = &NodeClassReference{Kind: ref.Kind, Name: ref.Name, Group: ref.Group}
	}
	return DriftHash(hashed, "the template of nodepool "+in.Name)
}

// DriftHash returns the static drift hash of v as Karpenter computes it for its objects: the
// decimal string of a 64-bit hashstructure hash (FormatV2, SlicesAsSets, IgnoreZeroValue,
// ZeroNil). v must hold only values hashstructure can walk (no channels, no functions), or it
// panics naming what was hashed; the hashed objects are plain data.
func DriftHash(v any, what string) string {
	h, err := hashstructure.Hash(v, hashstructure.FormatV2, &hashstructure.HashOptions{
		SlicesAsSets:    true,
		IgnoreZeroValue: true,
		ZeroNil:         true,
	})
	if err != nil {
		panic(fmt.Sprintf("hash %s: %v", what, err))
	}
	return fmt.Sprint(h)
}

// OwnerReference is the owner reference a NodeClaim of the NodePool carries, so that deleting the
// NodePool deletes its NodeClaims (and termination drains their nodes).
func (in *NodePool) OwnerReference() metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         GroupVersion.String(),
		Kind:               "NodePool",
		Name:               in.Name,
		UID:                in.UID,
		BlockOwnerDeletion: ptr.To(true),
	}
}
