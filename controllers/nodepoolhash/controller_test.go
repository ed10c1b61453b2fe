package nodepoolhash_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/nodepoolhash"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func startController(t *testing.T) {
	t.Helper()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		return nodepoolhash.NewController(mgr.GetClient(), nodepoolhash.Options{}).SetupWithManager(mgr)
	})
}

// newNodePool returns a NodePool with a template label and the given annotations.
func newNodePool(annotations map[string]string) *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: nct.Name("pool"), Annotations: annotations},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{
				TemplateObjectMeta: karpv1.TemplateObjectMeta{Labels: map[string]string{"team": "a"}},
				Spec: karpv1.NodeClaimTemplateSpec{
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.ArchitectureAmd64}}},
					NodeClassRef: &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: "LocalNodeClass", Name: "default"},
				},
			},
		},
	}
}

func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(t.Context(), obj); err != nil {
		t.Fatalf("create %s: %v", obj.GetName(), err)
	}
}

// stamped returns nil once the NodePool carries its current hash and the current version.
func stamped(ctx context.Context, np *karpv1.NodePool) error {
	if err := env.Get(ctx, np); err != nil {
		return err
	}
	want := np.Hash()
	if h, v := np.Annotations[karpv1.NodePoolHashAnnotationKey], np.Annotations[karpv1.NodePoolHashVersionAnnotationKey]; h != want || v != karpv1.NodePoolHashVersion {
		return fmt.Errorf("nodepool %s has hash %q version %q, want %q %q", np.Name, h, v, want, karpv1.NodePoolHashVersion)
	}
	return nil
}

func TestStampsNodePools(t *testing.T) {
	startController(t)
	np := newNodePool(nil)
	create(t, np)
	nct.Eventually(t, 10*time.Second, "new nodepool stamped", func(ctx context.Context) error { return stamped(ctx, np) })
	first := np.Annotations[karpv1.NodePoolHashAnnotationKey]

	for _, tc := range []struct {
		name   string
		change func(np *karpv1.NodePool)
	}{
		{name: "template label", change: func(np *karpv1.NodePool) { np.Spec.Template.Labels["team"] = "b" }},
		{name: "taint", change: func(np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = []karpv1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := np.Annotations[karpv1.NodePoolHashAnnotationKey]
			tc.change(np)
			if err := env.Client.Update(t.Context(), np); err != nil {
				t.Fatal(err)
			}
			nct.Eventually(t, 10*time.Second, "nodepool re-stamped", func(ctx context.Context) error { return stamped(ctx, np) })
			if after := np.Annotations[karpv1.NodePoolHashAnnotationKey]; after == before || after == first {
				t.Errorf("hash %s after the change, want a new one (before %s)", after, before)
			}
		})
	}
}

// TestVersionMismatchRestampsNodeClaims starts from a NodePool stamped by an older hash scheme.
// Its NodeClaims of that scheme take the current version, and the current hash unless they are
// drifted already; NodeClaims of the current scheme and of other NodePools stay as they are.
func TestVersionMismatchRestampsNodeClaims(t *testing.T) {
	old := map[string]string{karpv1.NodePoolHashAnnotationKey: "12345", karpv1.NodePoolHashVersionAnnotationKey: "v2"}
	np := newNodePool(old)
	cases := []struct {
		name        string
		pool        string
		annotations map[string]string
		drifted     bool
		wantHash    string // "current" means the NodePool's current hash
		wantVersion string
	}{
		{name: "old version", annotations: old, wantHash: "current", wantVersion: karpv1.NodePoolHashVersion},
		{name: "old version, drifted", annotations: old, drifted: true, wantHash: "12345", wantVersion: karpv1.NodePoolHashVersion},
		{name: "no annotations", wantHash: "current", wantVersion: karpv1.NodePoolHashVersion},
		{name: "current version", annotations: map[string]string{karpv1.NodePoolHashAnnotationKey: "678", karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion},
			wantHash: "678", wantVersion: karpv1.NodePoolHashVersion},
		{name: "other nodepool", pool: "other-pool", annotations: old, wantHash: "12345", wantVersion: "v2"},
	}
	// Everything exists before the controller starts, so its first look sees all of it.
	claims := make([]*karpv1.NodeClaim, len(cases))
	for i, tc := range cases {
		pool := tc.pool
		if pool == "" {
			pool = np.Name
		}
		nc := nct.NodeClaim(nct.Name("nc"), pool)
		nc.Annotations = tc.annotations
		create(t, nc)
		if tc.drifted {
			stored := nc.DeepCopy()
			nc.SetCondition(start, karpv1.ConditionTypeDrifted, metav1.ConditionTrue, "NodePoolDrifted", "NodePoolDrifted")
			if err := env.Client.Status().Patch(t.Context(), nc, client.MergeFrom(stored)); err != nil {
				t.Fatal(err)
			}
		}
		claims[i] = nc
	}
	create(t, np)
	startController(t)
	nct.Eventually(t, 10*time.Second, "nodepool stamped with the current version", func(ctx context.Context) error { return stamped(ctx, np) })
	current := np.Annotations[karpv1.NodePoolHashAnnotationKey]
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc := claims[i]
			if err := env.Get(t.Context(), nc); err != nil {
				t.Fatal(err)
			}
			want := tc.wantHash
			if want == "current" {
				want = current
			}
			if h, v := nc.Annotations[karpv1.NodePoolHashAnnotationKey], nc.Annotations[karpv1.NodePoolHashVersionAnnotationKey]; h != want || v != tc.wantVersion {
				t.Errorf("nodeclaim has hash %q version %q, want %q %q", h, v, want, tc.wantVersion)
			}
		})
	}
}
