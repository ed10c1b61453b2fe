package operator

import (
	"context"
	"fmt"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/webhooks"
)

// instanceTypeLister adapts a cloud provider to the validating webhook, which denies NodePool
// requirements that no instance type of the catalog satisfies. Each instance type is described by
// the values its labels can take; keys it only constrains by exclusion are left out.
func instanceTypeLister(cp cloudprovider.CloudProvider) webhooks.InstanceTypeLister {
	return webhooks.InstanceTypeListerFunc(func(ctx context.Context, np *karpv1.NodePool) ([]webhooks.InstanceTypeLabels, error) {
		its, err := cp.GetInstanceTypes(ctx, np)
		if err != nil {
			return nil, fmt.Errorf("instance types of NodePool %s: %w", np.Name, err)
		}
		out := make([]webhooks.InstanceTypeLabels, 0, len(its))
		for _, it := range its {
			labels := webhooks.InstanceTypeLabels{}
			for _, r := range it.Requirements.Items() {
				if r.IsComplement() {
					continue
				}
				labels[r.Key()] = r.Values()
			}
			out = append(out, labels)
		}
		return out, nil
	})
}
