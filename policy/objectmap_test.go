package policy

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// TestObjectToMap checks the conversion of typed objects for the engine: apiVersion and kind from the given
// GroupVersionKind, managedFields dropped, the argument untouched.
func TestObjectObjectToMap(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	tests := []struct {
		name string
		obj  runtime.Object
		gvk  schema.GroupVersionKind
		want map[string]any
	}{
		{
			name: "typed NodePool without TypeMeta, managedFields dropped",
			obj: &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general", Labels: map[string]string{"team": "a"}, ManagedFields: managed},
				Spec: karpv1.NodePoolSpec{Weight: ptr.To(int32(7))}},
			gvk:  karpv1.GroupVersion.WithKind("NodePool"),
			want: map[string]any{"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "general", "team": "a", "weight": int64(7)},
		},
		{
			name: "core Pod gets apiVersion v1",
			obj:  &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", ManagedFields: managed}},
			gvk:  corev1.SchemeGroupVersion.WithKind("Pod"),
			want: map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "web"},
		},
		{
			name: "TypeMeta that disagrees is overwritten",
			obj:  &v1alpha1.LocalNodeClass{TypeMeta: metav1.TypeMeta{APIVersion: "wrong/v9", Kind: "Wrong"}, ObjectMeta: metav1.ObjectMeta{Name: "local"}},
			gvk:  v1alpha1.GroupVersion.WithKind("LocalNodeClass"),
			want: map[string]any{"apiVersion": "joiner.dev/v1alpha1", "kind": "LocalNodeClass", "name": "local"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ObjectToMap(tc.obj, tc.gvk)
			if err != nil {
				t.Fatal(err)
			}
			md, _ := m["metadata"].(map[string]any)
			if _, ok := md["managedFields"]; ok {
				t.Errorf("managedFields kept: %v", md["managedFields"])
			}
			got := map[string]any{"apiVersion": m["apiVersion"], "kind": m["kind"], "name": md["name"]}
			if labels, ok := md["labels"].(map[string]any); ok {
				got["team"] = labels["team"]
			}
			if spec, ok := m["spec"].(map[string]any); ok && spec["weight"] != nil {
				got["weight"] = spec["weight"]
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			// The engine accepts the map as a review and as an inventory object.
			if _, err := NewReview(OperationCreate, m, nil); err != nil {
				t.Errorf("NewReview: %v", err)
			}
		})
	}
	// The object itself is left alone.
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "general", ManagedFields: managed}}
	if _, err := ObjectToMap(np, karpv1.GroupVersion.WithKind("NodePool")); err != nil {
		t.Fatal(err)
	}
	if len(np.ManagedFields) != 1 || np.Kind != "" {
		t.Errorf("ToMap modified its argument: %+v", np.ObjectMeta)
	}
}
