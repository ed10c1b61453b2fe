package fieldindex

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/api/scheme"
)

// builderIndexer registers field indexes on a fake client builder, so that the tests use the
// very index functions Register installs.
type builderIndexer struct{ builder *fake.ClientBuilder }

func (b builderIndexer) IndexField(_ context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	b.builder.WithIndex(obj, field, extract)
	return nil
}

func newIndexedClient(t *testing.T, objs ...client.Object) client.Client {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	builder := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...)
	if err := Register(context.Background(), builderIndexer{builder: builder}); err != nil {
		t.Fatal(err)
	}
	return builder.Build()
}

func node(name, providerID string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
}

func nodeClaim(name, providerID string) *karpv1.NodeClaim {
	return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: karpv1.NodeClaimStatus{ProviderID: providerID}}
}

// requestNames returns the sorted names of the requests mapFn returns for o.
func requestNames(mapFn handler.MapFunc, o client.Object) []string {
	var names []string
	for _, req := range mapFn(context.Background(), o) {
		names = append(names, req.Name)
	}
	slices.Sort(names)
	return names
}

func TestNodeClaimRequestsForNode(t *testing.T) {
	kube := newIndexedClient(t,
		nodeClaim("a", "fake://a"), nodeClaim("a-dup", "fake://a"), nodeClaim("b", "fake://b"), nodeClaim("unlaunched", ""))
	mapFn := NodeClaimRequestsForNode(kube)
	cases := []struct {
		name string
		obj  client.Object
		want []string
	}{
		{name: "one nodeclaim", obj: node("n-b", "fake://b"), want: []string{"b"}},
		{name: "several nodeclaims", obj: node("n-a", "fake://a"), want: []string{"a", "a-dup"}},
		{name: "no nodeclaim", obj: node("n-c", "fake://c"), want: nil},
		{name: "node without provider id", obj: node("n-none", ""), want: nil},
		{name: "not a node", obj: nodeClaim("b", "fake://b"), want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := requestNames(mapFn, tc.obj); !slices.Equal(got, tc.want) {
				t.Errorf("requests = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeRequestsForNodeClaim(t *testing.T) {
	kube := newIndexedClient(t,
		node("n-a", "fake://a"), node("n-a-dup", "fake://a"), node("n-b", "fake://b"), node("n-unregistered", ""))
	mapFn := NodeRequestsForNodeClaim(kube)
	cases := []struct {
		name string
		obj  client.Object
		want []string
	}{
		{name: "one node", obj: nodeClaim("b", "fake://b"), want: []string{"n-b"}},
		{name: "several nodes", obj: nodeClaim("a", "fake://a"), want: []string{"n-a", "n-a-dup"}},
		{name: "no node", obj: nodeClaim("c", "fake://c"), want: nil},
		{name: "nodeclaim without provider id", obj: nodeClaim("unlaunched", ""), want: nil},
		{name: "not a nodeclaim", obj: node("n-b", "fake://b"), want: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := requestNames(mapFn, tc.obj); !slices.Equal(got, tc.want) {
				t.Errorf("requests = %v, want %v", got, tc.want)
			}
		})
	}
}
