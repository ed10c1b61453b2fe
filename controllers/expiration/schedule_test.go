package expiration

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

func TestJitterIsDeterministicAndBounded(t *testing.T) {
	cases := []struct {
		expireAfter time.Duration
		window      time.Duration
	}{
		{expireAfter: 720 * time.Hour, window: time.Hour},
		{expireAfter: 10 * time.Hour, window: time.Hour},
		{expireAfter: time.Hour, window: 6 * time.Minute},
		{expireAfter: 30 * time.Second, window: 3 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.expireAfter.String(), func(t *testing.T) {
			const n = 2000
			lo, hi := tc.window, time.Duration(0)
			var deciles [10]int
			for range n {
				uid := uuid.NewUUID()
				j := Jitter(uid, tc.expireAfter)
				if again := Jitter(uid, tc.expireAfter); again != j {
					t.Fatalf("Jitter(%s) = %s, then %s", uid, j, again)
				}
				if j < 0 || j >= tc.window {
					t.Fatalf("Jitter(%s, %s) = %s, want in [0, %s)", uid, tc.expireAfter, j, tc.window)
				}
				lo, hi = min(lo, j), max(hi, j)
				deciles[int(10*j/tc.window)]++
			}
			// Uniform over 2000 UIDs: every tenth of the window gets about 200 of them.
			for i, count := range deciles {
				if count < n/20 {
					t.Errorf("only %d of %d jitters in tenth %d of the window: %v", count, n, i, deciles)
				}
			}
		})
	}
}

// fixedJitter is the jitter of the UID in TestJitterOfAFixedUID under expireAfter 720h (window
// 1h): FNV-1a 64 of the UID × 3.6e12 ns / 2^64.
const fixedJitter = 3409954170010 * time.Nanosecond

func TestJitterOfAFixedUID(t *testing.T) {
	// Pins the hash: every replica and every release must agree on a NodeClaim's soft deadline.
	uid := types.UID("6a1f4c1e-2b7d-4c59-9d8e-0f3b5a7c9e21")
	if got, want := Jitter(uid, 720*time.Hour), fixedJitter; got != want {
		t.Errorf("Jitter(%s, 720h) = %s (%d), want %s", uid, got, int64(got), want)
	}
	for _, d := range []time.Duration{0, 5 * time.Nanosecond, -time.Hour} {
		if got := Jitter(uid, d); got != 0 {
			t.Errorf("Jitter(%s, %s) = %s, want 0", uid, d, got)
		}
	}
}

func TestPolicyOf(t *testing.T) {
	pool := func(annotations map[string]string) *karpv1.NodePool {
		return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "pool", Annotations: annotations}}
	}
	const defaultGrace = 24 * time.Hour
	cases := []struct {
		name string
		np   *karpv1.NodePool
		want policy
		// problem is a substring of the one expected problem ("": none).
		problem string
	}{
		{name: "no nodepool", np: nil, want: policy{}},
		{name: "no annotation", np: pool(nil), want: policy{}},
		{name: "forceful", np: pool(map[string]string{karpv1.ExpirationAnnotationKey: "Forceful"}), want: policy{}},
		{name: "graceful, default grace", np: pool(map[string]string{karpv1.ExpirationAnnotationKey: "Graceful"}), want: policy{graceful: true, grace: defaultGrace}},
		{
			name: "graceful, 90m", np: pool(map[string]string{karpv1.ExpirationAnnotationKey: "Graceful", karpv1.ExpirationGraceAnnotationKey: "90m"}),
			want: policy{graceful: true, grace: 90 * time.Minute},
		},
		{
			name: "grace without graceful is ignored", np: pool(map[string]string{karpv1.ExpirationGraceAnnotationKey: "nonsense"}),
			want: policy{},
		},
		{
			name: "unparsable grace", np: pool(map[string]string{karpv1.ExpirationAnnotationKey: "Graceful", karpv1.ExpirationGraceAnnotationKey: "tomorrow"}),
			want: policy{graceful: true, grace: defaultGrace}, problem: `Invalid joiner.dev/expiration-grace annotation "tomorrow"`,
		},
		{
			name: "zero grace", np: pool(map[string]string{karpv1.ExpirationAnnotationKey: "Graceful", karpv1.ExpirationGraceAnnotationKey: "0s"}),
			want: policy{graceful: true, grace: defaultGrace}, problem: "must be positive",
		},
		{
			name: "negative grace", np: pool(map[string]string{karpv1.ExpirationAnnotationKey: "Graceful", karpv1.ExpirationGraceAnnotationKey: "-1h"}),
			want: policy{graceful: true, grace: defaultGrace}, problem: "must be positive",
		},
		{
			name: "unknown mode", np: pool(map[string]string{karpv1.ExpirationAnnotationKey: "graceful"}),
			want: policy{}, problem: `set it to "Graceful" or "Forceful"`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, problems := policyOf(tc.np, defaultGrace)
			if got != tc.want {
				t.Errorf("policy = %+v, want %+v", got, tc.want)
			}
			switch {
			case tc.problem == "" && len(problems) > 0:
				t.Errorf("problems = %+v, want none", problems)
			case tc.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0].message, tc.problem)):
				t.Errorf("problems = %+v, want one containing %q", problems, tc.problem)
			}
		})
	}
}

func TestScheduleAt(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	uid := types.UID("6a1f4c1e-2b7d-4c59-9d8e-0f3b5a7c9e21")
	nodeClaim := func(expireAfter string) *karpv1.NodeClaim {
		d, err := karpv1.ParseNillableDuration(expireAfter)
		if err != nil {
			t.Fatal(err)
		}
		return &karpv1.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "nc", UID: uid, CreationTimestamp: metav1.NewTime(created)},
			Spec:       karpv1.NodeClaimSpec{ExpireAfter: d},
		}
	}
	deadline := created.Add(720 * time.Hour)
	soft := deadline.Add(fixedJitter)
	graceful := policy{graceful: true, grace: 2 * time.Hour}
	cases := []struct {
		name     string
		policy   policy
		now      time.Time
		want     step
		wantWait time.Duration
	}{
		{name: "forceful, before the deadline", now: deadline.Add(-time.Minute), want: stepWait, wantWait: time.Minute},
		{name: "forceful, at the deadline", now: deadline, want: stepDelete},
		{name: "forceful, after the deadline", now: deadline.Add(time.Hour), want: stepDelete},
		{name: "graceful, before the deadline", policy: graceful, now: deadline.Add(-time.Minute), want: stepWait, wantWait: time.Minute + fixedJitter},
		{name: "graceful, between deadline and soft deadline", policy: graceful, now: deadline, want: stepWait, wantWait: fixedJitter},
		{name: "graceful, at the soft deadline", policy: graceful, now: soft, want: stepMark, wantWait: 2*time.Hour - fixedJitter},
		{name: "graceful, just before the hard deadline", policy: graceful, now: deadline.Add(2*time.Hour - time.Second), want: stepMark, wantWait: time.Second},
		{name: "graceful, at the hard deadline", policy: graceful, now: deadline.Add(2 * time.Hour), want: stepDelete},
		{
			// The jitter is longer than the grace: the hard deadline comes first.
			name: "graceful, grace shorter than the jitter", policy: policy{graceful: true, grace: time.Second},
			now: deadline, want: stepWait, wantWait: time.Second,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, ok := scheduleOf(nodeClaim("720h"), tc.policy)
			if !ok {
				t.Fatal("scheduleOf(720h) reports no expiry")
			}
			got, wait := s.at(tc.now)
			if got != tc.want || wait != tc.wantWait {
				t.Errorf("at(%s) = %d, %s; want %d, %s", tc.now, got, wait, tc.want, tc.wantWait)
			}
		})
	}
	for _, p := range []policy{{}, graceful} {
		if _, ok := scheduleOf(nodeClaim("Never"), p); ok {
			t.Errorf("scheduleOf(Never, %+v) reports an expiry", p)
		}
	}
}
