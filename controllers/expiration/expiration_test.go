package expiration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/metricstest"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/expiration"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// The tests create their NodeClaims before the controller starts, read the creationTimestamp the
// API server gave them, and put the fake clock where the case needs it relative to that. The
// controller asks to look again at the next instant of a NodeClaim's schedule, but
// controller-runtime waits for a RequeueAfter in real time, not on the fake clock; so a test that
// steps the clock either starts one second short of an instant (each requeue then asks for
// another second until the clock is stepped) or touches the NodeClaim afterwards.

// graceful are the annotations of a NodePool with graceful expiration and the grace (""
// leaves the default).
func graceful(grace string) map[string]string {
	a := map[string]string{karpv1.ExpirationAnnotationKey: karpv1.ExpirationGraceful}
	if grace != "" {
		a[karpv1.ExpirationGraceAnnotationKey] = grace
	}
	return a
}

// startController runs the expiration controller on the fake clock and returns the registry of
// its metrics.
func startController(t *testing.T, clk *clocktesting.FakeClock) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewRegistry()
	env.StartManager(t, func(mgr ctrl.Manager) error {
		c, err := expiration.NewController(mgr.GetClient(), clk, mgr.GetEventRecorder(expiration.ControllerName), reg, expiration.Options{})
		if err != nil {
			return err
		}
		return c.SetupWithManager(mgr)
	})
	return reg
}

// createNodePool creates a NodePool with the annotations.
func createNodePool(t *testing.T, annotations map[string]string) *karpv1.NodePool {
	t.Helper()
	np := &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: nct.Name("pool"), Annotations: annotations},
		Spec: karpv1.NodePoolSpec{
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.ArchitectureAmd64}}},
				NodeClassRef: &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: "LocalNodeClass", Name: "default"},
			}},
			Disruption: karpv1.Disruption{ConsolidateAfter: karpv1.NeverDuration()},
		},
	}
	if err := env.Client.Create(t.Context(), np); err != nil {
		t.Fatal(err)
	}
	return np
}

// createNodeClaim creates an on-demand NodeClaim of the pool (empty: without the nodepool label)
// with the expireAfter ("1h", "Never"). stale seeds an Expired=True condition, so that its removal
// shows that the controller has judged the NodeClaim.
func createNodeClaim(t *testing.T, pool, expireAfter string, stale bool) *karpv1.NodeClaim {
	t.Helper()
	nc := nct.NodeClaim(nct.Name("nc"), pool)
	if pool == "" {
		delete(nc.Labels, karpv1.NodePoolLabelKey)
	}
	nc.Labels[karpv1.CapacityTypeLabelKey] = karpv1.CapacityTypeOnDemand
	d, err := karpv1.ParseNillableDuration(expireAfter)
	if err != nil {
		t.Fatal(err)
	}
	nc.Spec.ExpireAfter = d
	if err := env.Client.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	if stale {
		stored := nc.DeepCopy()
		nc.SetCondition(time.Now(), karpv1.ConditionTypeExpired, metav1.ConditionTrue, "Stale", "seeded by the test")
		if err := env.Client.Status().Patch(t.Context(), nc, client.MergeFrom(stored)); err != nil {
			t.Fatal(err)
		}
	}
	return nc
}

// deadline is the NodeClaim's creationTimestamp + expireAfter.
func deadline(nc *karpv1.NodeClaim) time.Time {
	return nc.CreationTimestamp.Add(*nc.Spec.ExpireAfter.Duration)
}

// softDeadline is deadline + the NodeClaim's jitter.
func softDeadline(nc *karpv1.NodeClaim) time.Time {
	return deadline(nc).Add(expiration.Jitter(nc.UID, *nc.Spec.ExpireAfter.Duration))
}

// touch changes an annotation of the NodeClaim, which makes the controller reconcile it.
func touch(t *testing.T, nc *karpv1.NodeClaim) {
	t.Helper()
	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"test.joiner.dev/touched":"`+time.Now().Format(time.RFC3339Nano)+`"}}}`))
	if err := env.Client.Patch(t.Context(), nc, patch); err != nil {
		t.Fatal(err)
	}
}

// expiredCount returns karpenter_nodeclaims_disrupted_total{reason="expired", nodepool,
// capacity_type="on-demand"} (0 when the series does not exist).
func expiredCount(t *testing.T, reg *prometheus.Registry, pool string) float64 {
	t.Helper()
	return metricstest.Sum(t, reg, "karpenter_nodeclaims_disrupted_total",
		map[string]string{"reason": expiration.DisruptedExpired, "nodepool": pool, "capacity_type": karpv1.CapacityTypeOnDemand})
}

// state returns nil when the NodeClaim is in the wanted state: "deleted", "expired" (exists with
// Expired=True) or "kept" (exists without an Expired condition).
func state(ctx context.Context, nc *karpv1.NodeClaim, want string) error {
	if want == "deleted" {
		return env.Gone(ctx, nc)
	}
	got := nc.DeepCopy()
	if err := env.Get(ctx, got); err != nil {
		return err
	}
	if !got.DeletionTimestamp.IsZero() {
		return fmt.Errorf("nodeclaim %s is being deleted", nc.Name)
	}
	c := got.StatusCondition(karpv1.ConditionTypeExpired)
	switch {
	case want == "expired":
		return nct.Condition(got, karpv1.ConditionTypeExpired, metav1.ConditionTrue, expiration.ReasonExpired)
	case c != nil:
		return fmt.Errorf("nodeclaim %s has condition Expired=%s (%s), want none", nc.Name, c.Status, c.Reason)
	}
	return nil
}

// settle waits until the NodeClaim reaches the state, then checks for a second that it stays
// there (unless deleted).
func settle(t *testing.T, nc *karpv1.NodeClaim, want string) {
	t.Helper()
	nct.Eventually(t, 10*time.Second, "nodeclaim "+want, func(ctx context.Context) error { return state(ctx, nc, want) })
	if want != "deleted" {
		nct.Consistently(t, time.Second, "nodeclaim stays "+want, func(ctx context.Context) error { return state(ctx, nc, want) })
	}
}

func TestExpiry(t *testing.T) {
	cases := []struct {
		name        string
		annotations map[string]string
		// pool "none" leaves the NodeClaim without a nodepool label.
		pool        string
		expireAfter string
		// now is where the fake clock stands, given the NodeClaim.
		now  func(nc *karpv1.NodeClaim) time.Time
		want string
		// event is a substring of the Expired event expected on the NodeClaim ("": none checked).
		event string
	}{
		{
			name: "forceful: past the deadline", expireAfter: "1h",
			now: func(nc *karpv1.NodeClaim) time.Time { return deadline(nc).Add(time.Second) }, want: "deleted", event: "NodeClaim expired after 1h",
		},
		{
			name: "forceful: at the deadline", expireAfter: "1h",
			now: deadline, want: "deleted", event: "NodeClaim expired after 1h",
		},
		{
			name: "forceful: before the deadline", expireAfter: "1h",
			now: func(nc *karpv1.NodeClaim) time.Time { return deadline(nc).Add(-time.Minute) }, want: "kept",
		},
		{
			name: "Never", expireAfter: "Never",
			now: func(nc *karpv1.NodeClaim) time.Time { return nc.CreationTimestamp.Add(100000 * time.Hour) }, want: "kept",
		},
		{
			name: "no nodepool: forceful", pool: "none", expireAfter: "1h",
			now: deadline, want: "deleted", event: "NodeClaim expired after 1h",
		},
		{
			name: "forceful annotation", annotations: map[string]string{karpv1.ExpirationAnnotationKey: karpv1.ExpirationForceful}, expireAfter: "1h",
			now: deadline, want: "deleted", event: "NodeClaim expired after 1h",
		},
		{
			name: "graceful: past the deadline, before the jitter", annotations: graceful(""), expireAfter: "10h",
			now: func(nc *karpv1.NodeClaim) time.Time {
				return deadline(nc).Add(softDeadline(nc).Sub(deadline(nc)) / 2)
			},
			want: "kept",
		},
		{
			name: "graceful: past the soft deadline", annotations: graceful(""), expireAfter: "10h",
			now:  func(nc *karpv1.NodeClaim) time.Time { return softDeadline(nc) },
			want: "expired", event: "it will be replaced within the disruption budgets",
		},
		{
			name: "graceful: just before deadline + grace", annotations: graceful("2h"), expireAfter: "10h",
			now:  func(nc *karpv1.NodeClaim) time.Time { return deadline(nc).Add(2*time.Hour - time.Second) },
			want: "expired",
		},
		{
			name: "graceful: at deadline + grace", annotations: graceful("2h"), expireAfter: "10h",
			now:  func(nc *karpv1.NodeClaim) time.Time { return deadline(nc).Add(2 * time.Hour) },
			want: "deleted", event: "NodeClaim expired after 10h and was not replaced within the grace period of 2h0m0s",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pool := createNodePool(t, tc.annotations).Name
			if tc.pool == "none" {
				pool = ""
			}
			// A case that expects no condition starts with a stale one, so that its removal shows
			// that the controller has looked at the NodeClaim.
			nc := createNodeClaim(t, pool, tc.expireAfter, tc.want == "kept")
			reg := startController(t, clocktesting.NewFakeClock(tc.now(nc)))
			settle(t, nc, tc.want)

			wantCount := 0.0
			if tc.want == "deleted" {
				// The controller counts the deletion once its Delete call has returned, which can be
				// after the test sees the NodeClaim gone: wait for the count.
				wantCount = 1
				nct.Eventually(t, 10*time.Second, "the expired count", func(context.Context) error {
					if got := expiredCount(t, reg, pool); got != wantCount {
						return fmt.Errorf("karpenter_nodeclaims_disrupted_total{reason=expired, nodepool=%q} = %v, want %v", pool, got, wantCount)
					}
					return nil
				})
			}
			if got := expiredCount(t, reg, pool); got != wantCount {
				t.Errorf("karpenter_nodeclaims_disrupted_total{reason=expired, nodepool=%q} = %v, want %v", pool, got, wantCount)
			}
			if tc.event != "" {
				nct.Eventually(t, 10*time.Second, "Expired event", func(ctx context.Context) error {
					return env.HasEvent(ctx, nc.Name, expiration.ReasonExpired, tc.event)
				})
			}
		})
	}
}

// TestExpiryByRequeue shows that a NodeClaim not yet expired is requeued for its deadline: the
// clock starts one second short of it, and the NodeClaim goes once the clock is stepped, with
// nothing else happening to it.
func TestExpiryByRequeue(t *testing.T) {
	pool := createNodePool(t, nil).Name
	nc := createNodeClaim(t, pool, "1h", true)
	clk := clocktesting.NewFakeClock(deadline(nc).Add(-time.Second))
	reg := startController(t, clk)
	settle(t, nc, "kept")

	clk.Step(2 * time.Second)
	settle(t, nc, "deleted")
	if got := expiredCount(t, reg, pool); got != 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=expired} = %v, want 1", got)
	}
}

// TestGracefulExpiry walks one NodeClaim of a graceful NodePool through its schedule: kept until
// the soft deadline, marked Expired (and not deleted) from then on, deleted at deadline + grace.
func TestGracefulExpiry(t *testing.T) {
	pool := createNodePool(t, graceful("1h")).Name
	nc := createNodeClaim(t, pool, "10h", true)
	// One second short of the soft deadline, so that the requeue finds it (see the top of the file).
	clk := clocktesting.NewFakeClock(softDeadline(nc).Add(-time.Second))
	reg := startController(t, clk)
	settle(t, nc, "kept")

	clk.Step(2 * time.Second)
	settle(t, nc, "expired")
	if err := env.Get(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	hard := deadline(nc).Add(time.Hour).UTC().Format(time.RFC3339)
	if msg := nc.StatusCondition(karpv1.ConditionTypeExpired).Message; !strings.Contains(msg, hard) {
		t.Errorf("Expired condition message %q does not name the hard deadline %s", msg, hard)
	}
	if got := expiredCount(t, reg, pool); got != 0 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=expired} = %v before the hard deadline, want 0", got)
	}

	clk.SetTime(deadline(nc).Add(time.Hour))
	touch(t, nc)
	settle(t, nc, "deleted")
	if got := expiredCount(t, reg, pool); got != 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=expired} = %v, want 1", got)
	}
	nct.Eventually(t, 10*time.Second, "Expired event", func(ctx context.Context) error {
		return env.HasEvent(ctx, nc.Name, expiration.ReasonExpired, "was not replaced within the grace period of 1h0m0s")
	})
}

func TestInvalidGraceFallsBackToTheDefault(t *testing.T) {
	np := createNodePool(t, graceful("tomorrow"))
	nc := createNodeClaim(t, np.Name, "10h", false)
	startController(t, clocktesting.NewFakeClock(softDeadline(nc)))
	settle(t, nc, "expired")

	if err := env.Get(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	hard := deadline(nc).Add(karpv1.DefaultExpirationGrace).UTC().Format(time.RFC3339)
	if msg := nc.StatusCondition(karpv1.ConditionTypeExpired).Message; !strings.Contains(msg, hard) {
		t.Errorf("Expired condition message %q does not name the default hard deadline %s", msg, hard)
	}
	nct.Eventually(t, 10*time.Second, "InvalidExpirationAnnotation warning on the NodePool", func(ctx context.Context) error {
		evs, err := env.Events(ctx, np.Name, expiration.ReasonInvalidAnnotation)
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Note, `Invalid joiner.dev/expiration-grace annotation "tomorrow"`) &&
				strings.Contains(ev.Note, `such as "24h"`) && strings.Contains(ev.Note, "using 24h0m0s meanwhile") {
				return nil
			}
		}
		return fmt.Errorf("no matching warning among %d events", len(evs))
	})
}

func TestDeletingNodeClaimIsLeftAlone(t *testing.T) {
	pool := createNodePool(t, nil).Name
	deleting := createNodeClaim(t, pool, "1h", false)
	// A finalizer holds the NodeClaim in deletion, as termination's would.
	deleting.Finalizers = []string{"test.joiner.dev/hold"}
	if err := env.Client.Update(t.Context(), deleting); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(t.Context(), deleting); err != nil {
		t.Fatal(err)
	}
	if err := env.Get(t.Context(), deleting); err != nil {
		t.Fatal(err)
	}
	other := createNodeClaim(t, pool, "1h", false)
	reg := startController(t, clocktesting.NewFakeClock(deadline(other).Add(time.Hour)))

	// The other, expired alike, is deleted: the controller has run over both.
	settle(t, other, "deleted")
	nct.Consistently(t, time.Second, "the deleting nodeclaim is untouched", func(ctx context.Context) error {
		got := deleting.DeepCopy()
		if err := env.Get(ctx, got); err != nil {
			return err
		}
		if got.ResourceVersion != deleting.ResourceVersion {
			return fmt.Errorf("nodeclaim %s written: resource version %s, was %s", got.Name, got.ResourceVersion, deleting.ResourceVersion)
		}
		if evs, err := env.Events(ctx, deleting.Name, expiration.ReasonExpired); err != nil || len(evs) > 0 {
			return errors.Join(err, fmt.Errorf("%d Expired events about the deleting nodeclaim", len(evs)))
		}
		return nil
	})
	if got := expiredCount(t, reg, pool); got != 1 {
		t.Errorf("karpenter_nodeclaims_disrupted_total{reason=expired} = %v, want 1 (the other nodeclaim only)", got)
	}
}

// TestNodePoolAnnotationChangeReachesNodeClaims switches a NodePool from graceful to forceful
// expiration: its NodeClaim, marked Expired, is deleted without anything happening to it.
func TestNodePoolAnnotationChangeReachesNodeClaims(t *testing.T) {
	np := createNodePool(t, graceful(""))
	nc := createNodeClaim(t, np.Name, "10h", false)
	startController(t, clocktesting.NewFakeClock(softDeadline(nc)))
	settle(t, nc, "expired")

	patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+karpv1.ExpirationAnnotationKey+`":null}}}`))
	if err := env.Client.Patch(t.Context(), np, patch); err != nil {
		t.Fatal(err)
	}
	settle(t, nc, "deleted")
	nct.Eventually(t, 10*time.Second, "Expired event", func(ctx context.Context) error {
		return env.HasEvent(ctx, nc.Name, expiration.ReasonExpired, "NodeClaim expired after 10h")
	})
}
