// Package admissioncatalog adapts a cloud provider's instance types to the validating webhook's
// webhooks.InstanceTypeLister, with which the webhook denies NodePool and NodeClaim requirements that
// no instance type satisfies. It only translates; it decides nothing.
package admissioncatalog

import (
	"context"
	"fmt"
	"sync"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/webhooks"
)

// maxCached bounds the translations a Lister keeps: when a provider replaces its instance types (a new
// offering, a shortage) the old ones are dropped with everything else once the bound is reached.
const maxCached = 8192

// Lister describes each instance type cp offers a NodePool by the values its labels can take. Keys an
// instance type only constrains by exclusion (NotIn, DoesNotExist) are left out. A provider's instance
// types are immutable, so each is translated once and its labels are shared between calls; the caller
// must not modify them.
func Lister(cp cloudprovider.CloudProvider) webhooks.InstanceTypeLister {
	l := &lister{cp: cp, labels: map[*cloudprovider.InstanceType]webhooks.InstanceTypeLabels{}}
	return webhooks.InstanceTypeListerFunc(l.instanceTypes)
}

type lister struct {
	cp     cloudprovider.CloudProvider
	mu     sync.Mutex
	labels map[*cloudprovider.InstanceType]webhooks.InstanceTypeLabels
}

func (l *lister) instanceTypes(ctx context.Context, np *karpv1.NodePool) ([]webhooks.InstanceTypeLabels, error) {
	its, err := l.cp.GetInstanceTypes(ctx, np)
	if err != nil {
		return nil, fmt.Errorf("instance types of NodePool %s: %w", np.Name, err)
	}
	out := make([]webhooks.InstanceTypeLabels, len(its))
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.labels)+len(its) > maxCached {
		clear(l.labels)
	}
	for i, it := range its {
		labels, ok := l.labels[it]
		if !ok {
			labels = labelsOf(it)
			l.labels[it] = labels
		}
		out[i] = labels
	}
	return out, nil
}

// labelsOf is the label values a node of it can have.
func labelsOf(it *cloudprovider.InstanceType) webhooks.InstanceTypeLabels {
	labels := webhooks.InstanceTypeLabels{}
	for _, r := range it.Requirements.Items() {
		if r.IsComplement() {
			continue
		}
		labels[r.Key()] = r.Values()
	}
	return labels
}
