package operator

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

func TestCacheTransforms(t *testing.T) {
	managed := []metav1.ManagedFieldsEntry{{Manager: "kube-scheduler", Operation: metav1.ManagedFieldsOperationUpdate}}
	pod := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", ResourceVersion: "7", Labels: map[string]string{"app": "a"}, ManagedFields: managed},
			Spec:       corev1.PodSpec{NodeName: "n", Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "c"}}, InitContainerStatuses: []corev1.ContainerStatus{{Name: "i"}}},
		}
	}
	tombstone := toolscache.DeletedFinalStateUnknown{Key: "default/p", Obj: pod()}
	tests := []struct {
		name      string
		transform toolscache.TransformFunc
		in        any
		check     func(t *testing.T, out any)
		wantErr   bool
	}{
		{name: "a pod keeps what Joiner reads, loses managed fields and container statuses", transform: stripPod, in: pod(),
			check: func(t *testing.T, out any) {
				p := out.(*corev1.Pod)
				if p.ManagedFields != nil || p.Status.ContainerStatuses != nil || p.Status.InitContainerStatuses != nil {
					t.Errorf("kept %v, %v, %v", p.ManagedFields, p.Status.ContainerStatuses, p.Status.InitContainerStatuses)
				}
				if p.ResourceVersion != "7" || p.Labels["app"] != "a" || p.Spec.NodeName != "n" || len(p.Spec.Containers) != 1 ||
					p.Status.Phase != corev1.PodRunning || len(p.Status.Conditions) != 1 {
					t.Errorf("dropped what controllers read: %+v", p)
				}
			}},
		{name: "a node loses its image list", transform: stripNode,
			in: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: managed}, Status: corev1.NodeStatus{
				Images: []corev1.ContainerImage{{Names: []string{"pause"}}}, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady}}}},
			check: func(t *testing.T, out any) {
				n := out.(*corev1.Node)
				if n.ManagedFields != nil || n.Status.Images != nil || len(n.Status.Conditions) != 1 {
					t.Errorf("node after the transform: %+v", n)
				}
			}},
		{name: "any other object loses its managed fields only", transform: stripManagedFields,
			in: &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", ResourceVersion: "3", ManagedFields: managed}},
			check: func(t *testing.T, out any) {
				nc := out.(*karpv1.NodeClaim)
				if nc.ManagedFields != nil || nc.ResourceVersion != "3" {
					t.Errorf("NodeClaim after the transform: %+v", nc.ObjectMeta)
				}
			}},
		{name: "a tombstone passes", transform: stripPod, in: tombstone,
			check: func(t *testing.T, out any) {
				if _, ok := out.(toolscache.DeletedFinalStateUnknown); !ok {
					t.Errorf("got %T", out)
				}
			}},
		{name: "a value without object metadata passes the default transform", transform: stripManagedFields, in: "not an object",
			check: func(t *testing.T, out any) {
				if out != "not an object" {
					t.Errorf("got %v", out)
				}
			}},
		{name: "a pod transform given a node is an error", transform: stripPod, in: &corev1.Node{}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := tt.transform(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want error: %v", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}
