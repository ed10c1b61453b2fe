package catalogbench

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/local"
)

// NodeClassName is the name of the LocalNodeClass InstanceTypes resolves NodePools against.
const NodeClassName = "default"

// NodeClassRef returns the reference a NodePool given to InstanceTypes must carry.
func NodeClassRef() *karpv1.NodeClassReference {
	return &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: local.NodeClassKind, Name: NodeClassName}
}

// InstanceTypes returns the instance types the local provider offers np in region, every zone of
// it: the embedded catalog's types with their spot and on-demand offerings per zone, as `make run`
// sees them. np must reference NodeClassRef(). The provider narrows nothing by np's requirements;
// the scheduler and the bounds do.
func InstanceTypes(ctx context.Context, region string, np *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	scheme, err := apischeme.New()
	if err != nil {
		return nil, fmt.Errorf("instance types of %s: %w", region, err)
	}
	class := &joinerv1alpha1.LocalNodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: NodeClassName},
		Spec:       joinerv1alpha1.LocalNodeClassSpec{Region: region},
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(class).Build()
	prov, err := local.New(ctx, kube, local.Options{})
	if err != nil {
		return nil, fmt.Errorf("instance types of %s: %w", region, err)
	}
	its, err := prov.GetInstanceTypes(ctx, np)
	if err != nil {
		return nil, fmt.Errorf("instance types of %s: %w", region, err)
	}
	return its, nil
}
