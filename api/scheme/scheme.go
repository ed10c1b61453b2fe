// Package scheme builds the runtime.Scheme every Joiner client, manager and test uses: the
// Kubernetes kinds and all of Joiner's API kinds. It only registers types.
package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// New returns a scheme with the Kubernetes kinds, karpenter.sh/v1, karpenter.k8s.aws/v1 and
// joiner.dev/v1alpha1 and autoscaling.x-k8s.io/v1beta1 (CapacityBuffer).
func New() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, karpv1.AddToScheme, awsv1.AddToScheme, joinerv1alpha1.AddToScheme, autoscalingv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, fmt.Errorf("build scheme: %w", err)
		}
	}
	return s, nil
}

// NodeClassKinds are the node class kinds Joiner knows: the local provider's LocalNodeClass and the
// AWS provider's EC2NodeClass. Controllers that follow node classes watch these by default.
func NodeClassKinds() []schema.GroupVersionKind {
	return []schema.GroupVersionKind{
		joinerv1alpha1.GroupVersion.WithKind("LocalNodeClass"),
		awsv1.GroupVersion.WithKind("EC2NodeClass"),
	}
}
