package nodeclaimgate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/tenancy"
	"github.com/joiner-dev/joiner/testsupport/eventstest"
	"github.com/joiner-dev/joiner/testsupport/fixtures"
	"github.com/joiner-dev/joiner/testsupport/metricstest"
)

func pod(name, namespace string) *corev1.Pod {
	p := fixtures.Pod(name, func(p *corev1.Pod) { p.Namespace = namespace })
	return &p
}

// TestCreate checks the gate's decision for NodeClaims of NodePool team-b: what it creates, what it
// refuses and how it says so.
func TestCreate(t *testing.T) {
	namespaces := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Annotations: map[string]string{tenancy.NodePoolsAnnotation: "team-a"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-ab", Annotations: map[string]string{tenancy.NodePoolsAnnotation: "team-a,team-b"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
	}
	failing := func(what string) *interceptor.Funcs {
		return &interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Namespace); ok && what == "get" {
					return errors.New("connection refused")
				}
				return c.Get(ctx, key, obj, opts...)
			},
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if what == "create" {
					return errors.New("admission webhook denied the request")
				}
				return c.Create(ctx, obj, opts...)
			},
		}
	}
	tests := []struct {
		name    string
		pods    []*corev1.Pod
		funcs   *interceptor.Funcs
		created bool
		// wantErr is a substring of the error, "" for none; refused whether it wraps ErrRefused.
		wantErr string
		refused bool
		// wantEvents are the Events recorded, in order.
		wantEvents []string
	}{
		{name: "pods of unbound and missing namespaces", pods: []*corev1.Pod{pod("a", "default"), pod("b", "no-such-namespace")}, created: true},
		{name: "pods of a namespace bound to the NodePool", pods: []*corev1.Pod{pod("a", "team-ab")}, created: true},
		{name: "a static NodePool's NodeClaim is for no pod", created: true},
		{name: "one pod of a namespace not bound to the NodePool refuses the whole NodeClaim",
			pods:    []*corev1.Pod{pod("ok", "default"), pod("breach", "team-a"), pod("fine", "team-ab")},
			wantErr: "NodeClaim refused by NodePool tenancy: NodePool team-b is not bound to the namespace of pod(s) team-a/breach", refused: true,
			wantEvents: []string{`Warning TenancyViolation refused to create a NodeClaim of NodePool team-b for this pod: namespace "team-a" is bound to team-a only (joiner.dev/nodepools)`}},
		{name: "a namespace that cannot be read creates nothing", pods: []*corev1.Pod{pod("a", "default")}, funcs: failing("get"),
			wantErr: `NodeClaim of NodePool team-b not created: read namespace "default" for its NodePool tenancy (joiner.dev/nodepools): connection refused`},
		{name: "the create's own error is returned as it is", pods: []*corev1.Pod{pod("a", "default")}, funcs: failing("create"),
			wantErr: "admission webhook denied the request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			b := ctrlfake.NewClientBuilder().WithScheme(s).WithObjects(namespaces...)
			if tc.funcs != nil {
				b = b.WithInterceptorFuncs(*tc.funcs)
			}
			kube := b.Build()
			recorder := events.NewFakeRecorder(10)
			reg := prometheus.NewRegistry()
			g, err := New(kube, recorder, logr.Discard(), reg, "provisioner")
			if err != nil {
				t.Fatal(err)
			}
			nc := fixtures.NodeClaim("nc", "team-b")
			err = g.Create(context.Background(), &nc, tc.pods)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Create: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Create returned %v, want an error containing %q", err, tc.wantErr)
			}
			if errors.Is(err, ErrRefused) != tc.refused {
				t.Errorf("errors.Is(%v, ErrRefused) = %v, want %v", err, !tc.refused, tc.refused)
			}
			list := &karpv1.NodeClaimList{}
			if err := kube.List(context.Background(), list); err != nil {
				t.Fatal(err)
			}
			if created := len(list.Items) == 1; created != tc.created {
				t.Errorf("NodeClaim created: %v, want %v", created, tc.created)
			}
			if got := eventstest.Drain(recorder); !slices.Equal(got, tc.wantEvents) {
				t.Errorf("Events\n got %q\nwant %q", got, tc.wantEvents)
			}
			want := 0.0
			if tc.refused {
				want = 1
			}
			if got := metricstest.Sum(t, reg, "joiner_tenancy_refused_nodeclaims_total", map[string]string{"controller": "provisioner", "nodepool": "team-b"}); got != want {
				t.Errorf("joiner_tenancy_refused_nodeclaims_total = %v, want %v", got, want)
			}
		})
	}
}
