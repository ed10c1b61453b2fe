// Package nodeclasswatch lets a controller follow node classes of several kinds (LocalNodeClass,
// EC2NodeClass, ...) without depending on any of them: it adds a metadata-only watch per kind the
// cluster serves, and skips, with one log line, kinds it does not. It maps nothing itself; the
// controller passes the map function of each kind.
package nodeclasswatch

import (
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// Served adds to b a metadata watch of each kind in kinds that mapper resolves, enqueueing through
// mapFor(kind) and filtered by preds. Kinds the cluster does not serve are logged and skipped; any
// other mapping error is returned.
func Served(b *builder.Builder, mapper meta.RESTMapper, log logr.Logger, kinds []schema.GroupVersionKind,
	mapFor func(schema.GroupKind) handler.MapFunc, preds ...predicate.Predicate) (*builder.Builder, error) {
	for _, gvk := range kinds {
		if _, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			if meta.IsNoMatchError(err) {
				log.Info("not watching node class kind the cluster does not serve", "kind", gvk.String())
				continue
			}
			return nil, fmt.Errorf("resolve %s: %w", gvk, err)
		}
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(gvk)
		b = b.WatchesMetadata(obj, handler.EnqueueRequestsFromMapFunc(mapFor(gvk.GroupKind())), builder.WithPredicates(preds...))
	}
	return b, nil
}
