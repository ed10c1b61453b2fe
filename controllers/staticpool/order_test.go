package staticpool

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

func TestScaleDownOrder(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cand := func(name string, initialized bool, pods int, age time.Duration) scaleDownCandidate {
		return scaleDownCandidate{
			nodeClaim:   &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(t0.Add(-age))}},
			initialized: initialized,
			pods:        pods,
		}
	}
	cases := []struct {
		name  string
		cands []scaleDownCandidate
		want  []string
	}{
		{
			name:  "not initialized before initialized, even with more pods elsewhere",
			cands: []scaleDownCandidate{cand("a", true, 0, time.Minute), cand("b", false, 0, time.Hour)},
			want:  []string{"b", "a"},
		},
		{
			name:  "fewest pods first",
			cands: []scaleDownCandidate{cand("a", true, 3, time.Minute), cand("b", true, 1, time.Hour), cand("c", true, 2, time.Second)},
			want:  []string{"b", "c", "a"},
		},
		{
			name:  "same pods: newest first",
			cands: []scaleDownCandidate{cand("a", true, 1, time.Hour), cand("b", true, 1, time.Minute), cand("c", false, 0, 2*time.Hour), cand("d", false, 0, time.Second)},
			want:  []string{"d", "c", "b", "a"},
		},
		{
			name:  "a tie goes by name",
			cands: []scaleDownCandidate{cand("b", true, 0, time.Minute), cand("a", true, 0, time.Minute)},
			want:  []string{"a", "b"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			scaleDownOrder(tc.cands)
			var got []string
			for _, c := range tc.cands {
				got = append(got, c.nodeClaim.Name)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("order %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeClaimSharesNothingWithTheNodePool(t *testing.T) {
	// The NodeClaim carries the template's own hash, whatever stale stamp the NodePool has.
	cases := []struct {
		name            string
		poolAnnotations map[string]string
		tmplAnnotations map[string]string
		want            map[string]string
	}{
		{name: "no annotations", want: map[string]string{karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}},
		{
			name:            "a stale hash on the NodePool",
			poolAnnotations: map[string]string{karpv1.NodePoolHashAnnotationKey: "1", "example.com/x": "y"},
			want:            map[string]string{karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion},
		},
		{
			name:            "template annotations",
			poolAnnotations: map[string]string{karpv1.NodePoolHashAnnotationKey: "1", karpv1.NodePoolHashVersionAnnotationKey: "v3"},
			tmplAnnotations: map[string]string{"example.com/a": "b"},
			want:            map[string]string{"example.com/a": "b", karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool", UID: "uid", Annotations: tc.poolAnnotations}}
			np.Spec.Template.Annotations = tc.tmplAnnotations
			np.Spec.Template.Labels = map[string]string{"example.com/team": "a"}
			np.Spec.Template.Spec.Taints = []karpv1.Taint{{Key: "k", Effect: "NoSchedule"}}
			nc := NodeClaim(np)
			tc.want[karpv1.NodePoolHashAnnotationKey] = np.Hash()
			if len(nc.Annotations) != len(tc.want) {
				t.Fatalf("annotations %v, want %v", nc.Annotations, tc.want)
			}
			for k, v := range tc.want {
				if nc.Annotations[k] != v {
					t.Errorf("annotation %s = %q, want %q", k, nc.Annotations[k], v)
				}
			}
			if nc.Labels[karpv1.NodePoolLabelKey] != "pool" || nc.Labels["example.com/team"] != "a" {
				t.Errorf("labels %v", nc.Labels)
			}
			nc.Labels["example.com/team"] = "changed"
			nc.Spec.Taints[0].Key = "changed"
			if nc.Annotations != nil {
				nc.Annotations["example.com/a"] = "changed"
			}
			if np.Spec.Template.Labels["example.com/team"] != "a" || np.Spec.Template.Spec.Taints[0].Key != "k" ||
				(tc.tmplAnnotations != nil && np.Spec.Template.Annotations["example.com/a"] != "b") {
				t.Error("changing the NodeClaim changed the NodePool template")
			}
		})
	}
}

func TestExpectations(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	nc := func(name string, deleting bool) karpv1.NodeClaim {
		out := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if deleting {
			out.DeletionTimestamp = &metav1.Time{Time: t0}
		}
		return out
	}
	e := newExpectations()
	e.expectCreated("p", "new-1", t0)
	e.expectCreated("p", "new-2", t0)
	e.expectDeleted("p", "old-1", t0)
	e.expectDeleted("p", "old-2", t0)

	// The cache shows new-1 and both old ones, old-2 already deleting.
	unseen, pending := e.reconcile("p", []karpv1.NodeClaim{nc("new-1", false), nc("old-1", false), nc("old-2", true)}, t0.Add(time.Second))
	if unseen != 1 || len(pending) != 1 || !pending["old-1"] {
		t.Fatalf("unseen %d pending %v, want 1 and [old-1]", unseen, pending)
	}
	// Nothing changes in the cache, but the expectations time out.
	unseen, pending = e.reconcile("p", []karpv1.NodeClaim{nc("new-1", false), nc("old-1", false)}, t0.Add(expectationTimeout+time.Second))
	if unseen != 0 || len(pending) != 0 {
		t.Fatalf("after the timeout: unseen %d pending %v, want none", unseen, pending)
	}
	if len(e.created) != 0 || len(e.deleted) != 0 {
		t.Errorf("expectations left behind: %v %v", e.created, e.deleted)
	}
}
