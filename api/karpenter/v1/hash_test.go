package v1_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

func mustDuration(t *testing.T, s string) karpv1.NillableDuration {
	t.Helper()
	d, err := karpv1.ParseNillableDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// templateNodePool returns a NodePool that sets every hashed template field, and some that are
// not hashed.
func templateNodePool(t *testing.T) *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: "pool"},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{
				TemplateObjectMeta: karpv1.TemplateObjectMeta{
					Labels:      map[string]string{"team": "a", "env": "prod"},
					Annotations: map[string]string{"note": "x"},
				},
				Spec: karpv1.NodeClaimTemplateSpec{
					Taints: []karpv1.Taint{
						{Key: "k1", Value: "v1", Effect: corev1.TaintEffectNoSchedule},
						{Key: "k2", Effect: corev1.TaintEffectNoExecute},
					},
					StartupTaints: []karpv1.Taint{{Key: "s", Effect: corev1.TaintEffectNoSchedule}},
					Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
						{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1a", "us-east-1b"}},
					},
					NodeClassRef:           &karpv1.NodeClassReference{Group: "joiner.dev", Kind: "LocalNodeClass", Name: "default"},
					TerminationGracePeriod: &metav1.Duration{Duration: 5 * time.Minute},
					ExpireAfter:            mustDuration(t, "720h"),
				},
			},
			Disruption: karpv1.Disruption{ConsolidateAfter: mustDuration(t, "30s"), Budgets: []karpv1.Budget{{Nodes: "10%"}}},
			Limits:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")},
			Weight:     ptr.To[int32](10),
		},
	}
}

// TestHashMatchesKarpenter pins Hash to the values Karpenter v1.14.0's NodePool.Hash() returns
// for the same templates (computed with sigs.k8s.io/karpenter v1.14.0), so that nodes launched by
// Karpenter do not drift when Joiner takes over.
func TestHashMatchesKarpenter(t *testing.T) {
	cases := []struct {
		name string
		np   func(t *testing.T) *karpv1.NodePool
		want string
	}{
		{name: "empty template", np: func(*testing.T) *karpv1.NodePool { return &karpv1.NodePool{} }, want: "17307646073972311821"},
		{name: "every hashed field", np: templateNodePool, want: "5910044463388832616"},
		{name: "expireAfter Never", np: func(t *testing.T) *karpv1.NodePool {
			np := templateNodePool(t)
			np.Spec.Template.Spec.ExpireAfter = karpv1.NeverDuration()
			return np
		}, want: "1935340723170414729"},
		{name: "node class and expireAfter only", np: func(t *testing.T) *karpv1.NodePool {
			return &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "joiner.dev", Kind: "LocalNodeClass", Name: "default"},
				ExpireAfter:  mustDuration(t, "720h"),
			}}}}
		}, want: "17825184082804033402"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.np(t).Hash(); got != tc.want {
				t.Errorf("Hash = %s, want %s (Karpenter v1.14.0)", got, tc.want)
			}
		})
	}
}

func TestHash(t *testing.T) {
	cases := []struct {
		name   string
		change func(t *testing.T, np *karpv1.NodePool)
		// changes says whether the hash must change.
		changes bool
	}{
		{name: "taints reordered", change: func(_ *testing.T, np *karpv1.NodePool) {
			ts := np.Spec.Template.Spec.Taints
			ts[0], ts[1] = ts[1], ts[0]
		}},
		{name: "labels rebuilt in another order", change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Labels = map[string]string{"env": "prod", "team": "a"}
		}},
		{name: "expireAfter written differently", change: func(t *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Spec.ExpireAfter = mustDuration(t, "719h60m")
		}},
		{name: "weight", change: func(_ *testing.T, np *karpv1.NodePool) { np.Spec.Weight = ptr.To[int32](90) }},
		{name: "limits", change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}
		}},
		{name: "disruption budgets", change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}}
		}},
		{name: "consolidateAfter", change: func(t *testing.T, np *karpv1.NodePool) {
			np.Spec.Disruption.ConsolidateAfter = mustDuration(t, "1h")
		}},
		{name: "replicas", change: func(_ *testing.T, np *karpv1.NodePool) { np.Spec.Replicas = ptr.To[int64](3) }},
		{name: "requirements", change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: karpv1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1c"}},
			}
		}},
		{name: "metadata and status", change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Annotations = map[string]string{karpv1.NodePoolHashAnnotationKey: "1"}
			np.Status.Nodes = ptr.To[int64](4)
		}},
		{name: "template label value", changes: true, change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Labels["team"] = "b"
		}},
		{name: "template label added", changes: true, change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Labels["new"] = "x"
		}},
		{name: "template annotation", changes: true, change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Annotations["note"] = "y"
		}},
		{name: "taint effect", changes: true, change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints[0].Effect = corev1.TaintEffectPreferNoSchedule
		}},
		{name: "taint removed", changes: true, change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Spec.Taints = np.Spec.Template.Spec.Taints[:1]
		}},
		{name: "startup taint", changes: true, change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Spec.StartupTaints = nil
		}},
		{name: "node class name", changes: true, change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Spec.NodeClassRef.Name = "other"
		}},
		{name: "terminationGracePeriod", changes: true, change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
		}},
		{name: "expireAfter", changes: true, change: func(t *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Spec.ExpireAfter = mustDuration(t, "24h")
		}},
		{name: "expireAfter Never", changes: true, change: func(_ *testing.T, np *karpv1.NodePool) {
			np.Spec.Template.Spec.ExpireAfter = karpv1.NeverDuration()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := templateNodePool(t)
			before := np.Hash()
			if again := np.Hash(); again != before {
				t.Fatalf("Hash is not deterministic: %s then %s", before, again)
			}
			tc.change(t, np)
			after := np.Hash()
			if changed := after != before; changed != tc.changes {
				t.Errorf("hash changed = %v (%s -> %s), want %v", changed, before, after, tc.changes)
			}
		})
	}
}

// TestHashNeverIsUnset checks that expireAfter "Never" hashes like an unset expireAfter, as in
// Karpenter (both leave the duration nil).
func TestHashNeverIsUnset(t *testing.T) {
	unset := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
		NodeClassRef: &karpv1.NodeClassReference{Group: "joiner.dev", Kind: "LocalNodeClass", Name: "default"},
	}}}}
	never := unset.DeepCopy()
	never.Spec.Template.Spec.ExpireAfter = karpv1.NeverDuration()
	if a, b := unset.Hash(), never.Hash(); a != b {
		t.Errorf("Hash with expireAfter Never = %s, unset = %s; want equal", b, a)
	}
}
