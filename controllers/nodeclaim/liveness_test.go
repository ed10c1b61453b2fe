package nodeclaim_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/nodeclaim"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// TestLivenessReplacesNodeClaimsWhoseInstanceIsGone checks that a Launched NodeClaim that has not
// registered is deleted as soon as the provider no longer knows its instance (as after a crash
// that lost a launch), once the short grace after launch has passed, instead of waiting out the
// 15-minute registration TTL; and that it is left alone inside that grace, while its instance
// exists, and when the provider cannot answer.
func TestLivenessReplacesNodeClaimsWhoseInstanceIsGone(t *testing.T) {
	cases := []struct {
		name string
		// vanish makes the provider lose the instance, or fail to answer.
		vanish      func(t *testing.T, cloud *fake.CloudProvider, nc *karpv1.NodeClaim)
		wantDeleted bool
	}{
		{
			name: "instance gone",
			vanish: func(t *testing.T, cloud *fake.CloudProvider, nc *karpv1.NodeClaim) {
				if err := cloud.Delete(t.Context(), nc); err != nil {
					t.Fatal(err)
				}
			},
			wantDeleted: true,
		},
		{name: "instance still there", vanish: func(*testing.T, *fake.CloudProvider, *karpv1.NodeClaim) {}},
		{
			name: "provider cannot answer",
			vanish: func(_ *testing.T, cloud *fake.CloudProvider, _ *karpv1.NodeClaim) {
				cloud.FailNextGet(errors.New("throttled"))
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cloud := fake.New()
			clk := clocktesting.NewFakeClock(time.Now())
			startControllersWithClock(t, cloud, nodeclaim.Options{}, clk)
			nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
			if err := env.Client.Create(t.Context(), nc); err != nil {
				t.Fatal(err)
			}
			var launchedAt time.Time
			nct.Eventually(t, 20*time.Second, "nodeclaim is launched", func(ctx context.Context) error {
				if err := env.Get(ctx, nc); err != nil {
					return err
				}
				if err := nct.Condition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, nodeclaim.ReasonLaunched); err != nil {
					return err
				}
				launchedAt = nc.StatusCondition(karpv1.ConditionTypeLaunched).LastTransitionTime.Time
				return nil
			})
			tc.vanish(t, cloud, nc)
			stays := func(what string) {
				t.Helper()
				nct.Consistently(t, time.Second, what, func(ctx context.Context) error {
					n, err := getNodeClaim(ctx, nc.Name)
					if err == nil && !n.DeletionTimestamp.IsZero() {
						return errors.New("nodeclaim is being deleted")
					}
					return err
				})
			}

			// Inside the grace after launch, the provider is not asked.
			clk.SetTime(launchedAt.Add(nodeclaim.DefaultInstanceNotFoundGrace - time.Second))
			touch(t, nc.Name, "inside-grace")
			stays("nodeclaim stays inside the grace after launch")

			// Past it, far inside the registration TTL.
			clk.SetTime(launchedAt.Add(nodeclaim.DefaultInstanceNotFoundGrace + time.Second))
			touch(t, nc.Name, "past-grace")
			if !tc.wantDeleted {
				stays("nodeclaim stays while its instance is not known to be gone")
				return
			}
			nct.Eventually(t, 20*time.Second, "nodeclaim deleted", func(ctx context.Context) error {
				return errors.Join(env.Gone(ctx, nc), env.HasEvent(ctx, nc.Name, nodeclaim.ReasonInstanceNotFound, "never registered"))
			})
			if ids := providerIDs(t, cloud); len(ids) > 0 {
				t.Errorf("instances %v left behind", ids)
			}
			if n := len(cloud.CreateCalls()); n != 1 {
				t.Errorf("%d Create calls, want 1: the replacement is the provisioner's job", n)
			}
		})
	}
}

// TestLivenessLooksAgainWhileUnregistered checks that the instance of an unregistered NodeClaim
// is looked up again after the grace, without anything touching the NodeClaim: the stage asks to
// be called back.
func TestLivenessLooksAgainWhileUnregistered(t *testing.T) {
	cloud := fake.New()
	startControllers(t, cloud, nodeclaim.Options{InstanceNotFoundGrace: 500 * time.Millisecond})
	nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
	if err := env.Client.Create(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 20*time.Second, "nodeclaim is launched", func(ctx context.Context) error {
		if err := env.Get(ctx, nc); err != nil {
			return err
		}
		return nct.Condition(nc, karpv1.ConditionTypeLaunched, metav1.ConditionTrue, nodeclaim.ReasonLaunched)
	})
	nct.Eventually(t, 10*time.Second, "the instance is looked up twice", func(context.Context) error {
		n := 0
		for _, id := range cloud.GetCalls() {
			if id == nc.Status.ProviderID {
				n++
			}
		}
		if n < 2 {
			return fmt.Errorf("%d lookups", n)
		}
		return nil
	})
	if err := cloud.Delete(t.Context(), nc); err != nil {
		t.Fatal(err)
	}
	nct.Eventually(t, 10*time.Second, "nodeclaim deleted", func(ctx context.Context) error {
		return errors.Join(env.Gone(ctx, nc), env.HasEvent(ctx, nc.Name, nodeclaim.ReasonInstanceNotFound, nc.Status.ProviderID))
	})
}
