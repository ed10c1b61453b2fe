// Package v1 holds the Go types of Karpenter's karpenter.sh/v1 API (NodePool and NodeClaim) as Joiner
// serves it, targeting the Karpenter v1.14 contract: the structs, the kubebuilder markers from which
// controller-gen renders the CRDs (schema, defaults and CEL rules), the well-known label, annotation,
// taint, finalizer and condition names, and small accessors. It must not hold controller logic.
//
// +kubebuilder:object:generate=true
// +groupName=karpenter.sh
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of NodePool and NodeClaim.
const Group = "karpenter.sh"

var (
	// GroupVersion is the group and version of the types in this package: karpenter.sh/v1.
	GroupVersion = schema.GroupVersion{Group: Group, Version: "v1"}

	// SchemeBuilder collects the types of this package so they can be added to a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds NodePool, NodePoolList, NodeClaim and NodeClaimList to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns the karpenter.sh group-qualified resource for an unqualified resource name
// such as "nodepools".
func Resource(resource string) schema.GroupResource {
	return GroupVersion.WithResource(resource).GroupResource()
}

// addKnownTypes registers the kinds of this package and the meta types of its group version.
func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &NodePool{}, &NodePoolList{}, &NodeClaim{}, &NodeClaimList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
