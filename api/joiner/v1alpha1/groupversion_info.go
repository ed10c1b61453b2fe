// Package v1alpha1 holds Joiner's own API kinds in the joiner.dev group: the local provider's
// node class and the Rego provisioning policy. It holds types, markers and constants only.
//
// +kubebuilder:object:generate=true
// +groupName=joiner.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of Joiner's own kinds.
	GroupVersion = schema.GroupVersion{Group: "joiner.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the kinds of this package.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
