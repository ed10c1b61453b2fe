package policy

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ObjectToMap converts a typed object into the JSON map the policy engine evaluates, with apiVersion and
// kind set (typed objects read from a cache carry neither) and managedFields dropped.
func ObjectToMap(obj runtime.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("convert %s to a map: %w", gvk.Kind, err)
	}
	u["apiVersion"], u["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return withoutManagedFields(u), nil
}
