package statusreconcile

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/api/scheme"
)

func TestReconcile(t *testing.T) {
	gr := schema.GroupResource{Group: "karpenter.sh", Resource: "nodeclaims"}
	var stored int // calls of the Stored hook
	setReady := func(_ context.Context, nc *karpv1.NodeClaim) (Outcome, error) {
		nc.SetCondition(time.Unix(0, 0), karpv1.ConditionTypeReady, metav1.ConditionTrue, "Ready", "")
		return Outcome{Result: reconcile.Result{RequeueAfter: time.Minute}, Stored: func(context.Context) { stored++ }}, nil
	}
	noChange := func(context.Context, *karpv1.NodeClaim) (Outcome, error) {
		return Outcome{Result: reconcile.Result{RequeueAfter: time.Second}, Stored: func(context.Context) { stored++ }}, nil
	}
	tests := []struct {
		name            string
		missing         bool
		deleting        bool
		includeDeleting bool
		decide          Decision[*karpv1.NodeClaim]
		getErr          error
		patchErr        error
		want            reconcile.Result
		wantErr         string
		wantPatches     int
		wantPatched     bool // the Stored hook ran
		wantDecided     bool
	}{
		{name: "gone", missing: true, decide: setReady},
		{name: "get fails", getErr: errors.New("boom"), decide: setReady, wantErr: "get nodeclaim nc: boom"},
		{name: "deleting is skipped", deleting: true, decide: setReady},
		{name: "deleting included", deleting: true, includeDeleting: true, decide: setReady, want: reconcile.Result{RequeueAfter: time.Minute}, wantPatches: 1, wantPatched: true, wantDecided: true},
		{name: "unchanged status is not patched", decide: noChange, want: reconcile.Result{RequeueAfter: time.Second}, wantDecided: true},
		{name: "changed status is patched", decide: setReady, want: reconcile.Result{RequeueAfter: time.Minute}, wantPatches: 1, wantPatched: true, wantDecided: true},
		{name: "conflict requeues", decide: setReady, patchErr: apierrors.NewConflict(gr, "nc", errors.New("stale")), want: reconcile.Result{RequeueAfter: ConflictRetry}, wantPatches: 1, wantDecided: true},
		{name: "gone while patching", decide: setReady, patchErr: apierrors.NewNotFound(gr, "nc"), wantPatches: 1, wantDecided: true},
		{name: "patch fails", decide: setReady, patchErr: errors.New("apiserver down"), wantErr: "patch nodeclaim nc status: apiserver down", wantPatches: 1, wantDecided: true},
		{name: "decision fails", decide: func(context.Context, *karpv1.NodeClaim) (Outcome, error) {
			return Outcome{}, errors.New("no provider")
		}, wantErr: "no provider", wantDecided: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc"}}
			if tt.deleting {
				nc.Finalizers = []string{"test/keep"}
				nc.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
			}
			patches := 0
			b := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&karpv1.NodeClaim{}).
				WithInterceptorFuncs(interceptor.Funcs{
					Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						if tt.getErr != nil {
							return tt.getErr
						}
						return c.Get(ctx, key, obj, opts...)
					},
					SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
						patches++
						if tt.patchErr != nil {
							return tt.patchErr
						}
						return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
					},
				})
			if !tt.missing {
				b = b.WithObjects(nc)
			}
			kube := b.Build()
			decided := false
			stored = 0
			r := &Reconciler[*karpv1.NodeClaim]{
				Kube: kube, Kind: "nodeclaim",
				New:    func() *karpv1.NodeClaim { return &karpv1.NodeClaim{} },
				Status: func(nc *karpv1.NodeClaim) any { return &nc.Status },
				Decide: func(ctx context.Context, nc *karpv1.NodeClaim) (Outcome, error) {
					decided = true
					return tt.decide(ctx, nc)
				},
				IncludeDeleting: tt.includeDeleting,
			}
			got, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "nc"}})
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Reconcile: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Reconcile error = %v, want %q", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("result = %+v, want %+v", got, tt.want)
			}
			if patched := stored == 1; patches != tt.wantPatches || patched != tt.wantPatched || decided != tt.wantDecided || stored > 1 {
				t.Errorf("patches %d, Stored hook calls %d, decided %v; want %d, %v, %v", patches, stored, decided, tt.wantPatches, tt.wantPatched, tt.wantDecided)
			}
			if tt.wantPatched {
				got := &karpv1.NodeClaim{}
				if err := kube.Get(context.Background(), client.ObjectKey{Name: "nc"}, got); err != nil {
					t.Fatal(err)
				}
				if got.StatusCondition(karpv1.ConditionTypeReady) == nil {
					t.Errorf("the patched status was not stored: %+v", got.Status)
				}
			}
		})
	}
}

func TestNodeClaimsByPool(t *testing.T) {
	tests := []struct {
		name     string
		label    string
		pools    []string
		poolErr  error
		wantPool string // "" means the decision saw nil
		wantErr  string
	}{
		{name: "no label", pools: []string{"a"}},
		{name: "pool found", label: "a", pools: []string{"a", "b"}, wantPool: "a"},
		{name: "pool missing", label: "c", pools: []string{"a"}},
		{name: "lookup fails", label: "a", pools: []string{"a"}, poolErr: apierrors.NewServiceUnavailable("down"), wantErr: "get nodepool a of nodeclaim nc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := scheme.New()
			if err != nil {
				t.Fatal(err)
			}
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc"}}
			if tt.label != "" {
				nc.Labels = map[string]string{karpv1.NodePoolLabelKey: tt.label}
			}
			objs := []client.Object{nc}
			for _, p := range tt.pools {
				objs = append(objs, &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: p}})
			}
			kube := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&karpv1.NodeClaim{}).WithObjects(objs...).
				WithInterceptorFuncs(interceptor.Funcs{
					Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						if _, pool := obj.(*karpv1.NodePool); pool && tt.poolErr != nil {
							return tt.poolErr
						}
						return c.Get(ctx, key, obj, opts...)
					},
				}).Build()
			seen, decided := "", false
			r := NodeClaimsByPool(kube, func(_ context.Context, _ *karpv1.NodeClaim, np *karpv1.NodePool) (Outcome, error) {
				decided = true
				if np != nil {
					seen = np.Name
				}
				return Outcome{}, nil
			})
			_, err = r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "nc"}})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || decided {
					t.Fatalf("error = %v (decided %v), want %q and no decision", err, decided, tt.wantErr)
				}
				return
			}
			if err != nil || !decided || seen != tt.wantPool {
				t.Errorf("err %v, decided %v, pool %q; want nil, true, %q", err, decided, seen, tt.wantPool)
			}
		})
	}
}
