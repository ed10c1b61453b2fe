package provisioning

import (
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/state"
	"github.com/joiner-dev/joiner/testsupport/fixtures"
)

const testNominationTTL = 15 * time.Minute

// nominatedAgo is a nomination made age before the test's now.
type nominatedAgo struct {
	nodeClaim string
	age       time.Duration
}

func TestCurrentNominations(t *testing.T) {
	liveClaims := []karpv1.NodeClaim{fixtures.NodeClaim("nc1", "a"), fixtures.NodeClaim("nc2", "a")}
	tests := []struct {
		name        string
		nominations map[types.UID]nominatedAgo
		pods        []corev1.Pod
		claims      []karpv1.NodeClaim
		want        map[types.UID]string
	}{
		{
			name:        "kept while the pod is pending and its NodeClaim exists",
			nominations: map[types.UID]nominatedAgo{"uid-p": {"nc1", time.Minute}},
			pods:        []corev1.Pod{fixtures.Pod("p")},
			claims:      liveClaims,
			want:        map[types.UID]string{"uid-p": "nc1"},
		},
		{
			name:        "kept for a pending pod kube-scheduler has not marked",
			nominations: map[types.UID]nominatedAgo{"uid-p": {"nc1", time.Minute}},
			pods:        []corev1.Pod{fixtures.Pod("p", fixtures.NotMarkedUnschedulable)},
			claims:      liveClaims,
			want:        map[types.UID]string{"uid-p": "nc1"},
		},
		{
			name:        "dropped once the pod is bound",
			nominations: map[types.UID]nominatedAgo{"uid-p": {"nc1", time.Minute}},
			pods:        []corev1.Pod{fixtures.Pod("p", fixtures.BoundTo("n1"))},
			claims:      liveClaims,
			want:        map[types.UID]string{},
		},
		{
			name:        "dropped when the pod is gone",
			nominations: map[types.UID]nominatedAgo{"uid-p": {"nc1", time.Minute}},
			pods:        []corev1.Pod{fixtures.Pod("other")},
			claims:      liveClaims,
			want:        map[types.UID]string{},
		},
		{
			name: "dropped when the pod has finished",
			nominations: map[types.UID]nominatedAgo{
				"uid-succeeded": {"nc1", time.Minute},
				"uid-failed":    {"nc1", time.Minute},
			},
			pods:   []corev1.Pod{fixtures.Pod("succeeded", fixtures.InPhase(corev1.PodSucceeded)), fixtures.Pod("failed", fixtures.InPhase(corev1.PodFailed))},
			claims: liveClaims,
			want:   map[types.UID]string{},
		},
		{
			name:        "dropped when its NodeClaim is gone",
			nominations: map[types.UID]nominatedAgo{"uid-p": {"nc-gone", time.Minute}},
			pods:        []corev1.Pod{fixtures.Pod("p")},
			claims:      liveClaims,
			want:        map[types.UID]string{},
		},
		{
			name:        "dropped when its NodeClaim is being deleted",
			nominations: map[types.UID]nominatedAgo{"uid-p": {"nc-deleting", time.Minute}},
			pods:        []corev1.Pod{fixtures.Pod("p")},
			claims:      append([]karpv1.NodeClaim{fixtures.NodeClaim("nc-deleting", "a", fixtures.ClaimDeleting)}, liveClaims...),
			want:        map[types.UID]string{},
		},
		{
			// kube-scheduler may have filled the node with other pods: the pod is judged afresh
			// against the pods bound there.
			name:        "dropped once its NodeClaim is Initialized",
			nominations: map[types.UID]nominatedAgo{"uid-p": {"nc-ready", time.Minute}},
			pods:        []corev1.Pod{fixtures.Pod("p")},
			claims: append([]karpv1.NodeClaim{fixtures.NodeClaim("nc-ready", "a", func(nc *karpv1.NodeClaim) {
				nc.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue}}
			})}, liveClaims...),
			want: map[types.UID]string{},
		},
		{
			name:        "kept up to the TTL",
			nominations: map[types.UID]nominatedAgo{"uid-p": {"nc1", testNominationTTL}},
			pods:        []corev1.Pod{fixtures.Pod("p")},
			claims:      liveClaims,
			want:        map[types.UID]string{"uid-p": "nc1"},
		},
		{
			name:        "dropped once older than the TTL",
			nominations: map[types.UID]nominatedAgo{"uid-p": {"nc1", testNominationTTL + time.Nanosecond}},
			pods:        []corev1.Pod{fixtures.Pod("p")},
			claims:      liveClaims,
			want:        map[types.UID]string{},
		},
		{
			name: "each nomination is judged on its own",
			nominations: map[types.UID]nominatedAgo{
				"uid-keep":    {"nc1", time.Minute},
				"uid-also":    {"nc2", 10 * time.Minute},
				"uid-bound":   {"nc1", time.Minute},
				"uid-expired": {"nc2", time.Hour},
				"uid-orphan":  {"nc-gone", time.Minute},
			},
			pods: []corev1.Pod{
				fixtures.Pod("keep"), fixtures.Pod("also"), fixtures.Pod("bound", fixtures.BoundTo("n1")), fixtures.Pod("expired"), fixtures.Pod("orphan"),
			},
			claims: liveClaims,
			want:   map[types.UID]string{"uid-keep": "nc1", "uid-also": "nc2"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			now := time.Unix(1_000_000, 0)
			p := &Provisioner{Clock: clocktesting.NewFakeClock(now), nominationTTL: testNominationTTL, nominated: map[types.UID]nomination{}}
			for uid, n := range tt.nominations {
				p.nominated[uid] = nomination{nodeClaim: n.nodeClaim, at: now.Add(-n.age)}
			}
			got := p.currentNominations(&state.ClusterState{Pods: tt.pods, NodeClaims: tt.claims})
			if !maps.Equal(got, tt.want) {
				t.Errorf("currentNominations = %v, want %v", got, tt.want)
			}
			// Dropped nominations are forgotten; kept ones are left as they were.
			if len(p.nominated) != len(tt.want) {
				t.Errorf("%d nominations remembered, want %d: %v", len(p.nominated), len(tt.want), p.nominated)
			}
			for uid, claim := range tt.want {
				n := p.nominated[uid]
				if wantAt := now.Add(-tt.nominations[uid].age); n.nodeClaim != claim || !n.at.Equal(wantAt) {
					t.Errorf("nomination of %s = %+v, want %s at %v", uid, n, claim, wantAt)
				}
			}
		})
	}
}

func TestNominate(t *testing.T) {
	// nominateStep advances the clock by after, then nominates pods to nodeClaim.
	type nominateStep struct {
		after     time.Duration
		pods      []string
		nodeClaim string
	}
	// nominatedAt is a nomination made after the start.
	type nominatedAt struct {
		nodeClaim string
		after     time.Duration
	}
	tests := []struct {
		name  string
		steps []nominateStep
		// want is, per pod, the NodeClaim and how long after the start it was nominated.
		want map[types.UID]nominatedAt
		// checkAfter is how long after the last step currentNominations runs; wantCurrent is
		// what it should return (every pod pending, nc1 and nc2 live).
		checkAfter  time.Duration
		wantCurrent map[types.UID]string
	}{
		{
			name:        "records the NodeClaim and the time for every pod",
			steps:       []nominateStep{{after: time.Minute, pods: []string{"a", "b"}, nodeClaim: "nc1"}},
			want:        map[types.UID]nominatedAt{"uid-a": {"nc1", time.Minute}, "uid-b": {"nc1", time.Minute}},
			wantCurrent: map[types.UID]string{"uid-a": "nc1", "uid-b": "nc1"},
		},
		{
			name: "a later nomination replaces the earlier one",
			steps: []nominateStep{
				{pods: []string{"a", "b"}, nodeClaim: "nc1"},
				{after: 10 * time.Minute, pods: []string{"b"}, nodeClaim: "nc2"},
			},
			want:        map[types.UID]nominatedAt{"uid-a": {"nc1", 0}, "uid-b": {"nc2", 10 * time.Minute}},
			wantCurrent: map[types.UID]string{"uid-a": "nc1", "uid-b": "nc2"},
		},
		{
			name: "the TTL counts from the latest nomination",
			steps: []nominateStep{
				{pods: []string{"a", "b"}, nodeClaim: "nc1"},
				{after: 10 * time.Minute, pods: []string{"b"}, nodeClaim: "nc1"},
			},
			want:        map[types.UID]nominatedAt{"uid-a": {"nc1", 0}, "uid-b": {"nc1", 10 * time.Minute}},
			checkAfter:  10 * time.Minute,
			wantCurrent: map[types.UID]string{"uid-b": "nc1"},
		},
		{
			name:        "nominating no pods records nothing",
			steps:       []nominateStep{{pods: nil, nodeClaim: "nc1"}},
			want:        map[types.UID]nominatedAt{},
			wantCurrent: map[types.UID]string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Unix(1_000_000, 0)
			clk := clocktesting.NewFakeClock(start)
			p := &Provisioner{Clock: clk, nominationTTL: testNominationTTL, nominated: map[types.UID]nomination{}}
			var pending []corev1.Pod
			for _, step := range tt.steps {
				clk.Step(step.after)
				var pods []*corev1.Pod
				for _, name := range step.pods {
					pod := fixtures.Pod(name)
					pods = append(pods, &pod)
					pending = append(pending, pod)
				}
				p.nominate(pods, step.nodeClaim)
			}
			if len(p.nominated) != len(tt.want) {
				t.Errorf("%d nominations recorded, want %d: %v", len(p.nominated), len(tt.want), p.nominated)
			}
			for uid, w := range tt.want {
				n, ok := p.nominated[uid]
				if wantAt := start.Add(w.after); !ok || n.nodeClaim != w.nodeClaim || !n.at.Equal(wantAt) {
					t.Errorf("nomination of %s = %+v (recorded %v), want %s at %v", uid, n, ok, w.nodeClaim, wantAt)
				}
			}
			clk.Step(tt.checkAfter)
			state := &state.ClusterState{Pods: pending, NodeClaims: []karpv1.NodeClaim{fixtures.NodeClaim("nc1", "a"), fixtures.NodeClaim("nc2", "a")}}
			if got := p.currentNominations(state); !maps.Equal(got, tt.wantCurrent) {
				t.Errorf("currentNominations after %v = %v, want %v", tt.checkAfter, got, tt.wantCurrent)
			}
		})
	}
}
