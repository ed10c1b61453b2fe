package aws

import (
	"context"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/joiner-dev/joiner/controllers/garbagecollection"
)

// TestMotoGarbageCollectionTerminatesLostInstances runs Joiner's garbage collection over the
// provider: an instance whose NodeClaim was never recorded (a launch whose result was lost) is
// listed by the cluster tag and terminated; the instance with a NodeClaim is kept.
func TestMotoGarbageCollectionTerminatesLostInstances(t *testing.T) {
	f := newMotoFixture(t, Options{})
	ctx := context.Background()
	kept, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	if err != nil {
		t.Fatal(err)
	}
	stored := kept.DeepCopy()
	stored.ResourceVersion = ""
	status := stored.Status
	if err := f.kube.Create(ctx, stored); err != nil {
		t.Fatal(err)
	}
	stored.Status = status
	if err := f.kube.Status().Update(ctx, stored); err != nil {
		t.Fatal(err)
	}
	lost, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	if err != nil {
		t.Fatal(err)
	}
	// Past the grace period of young instances.
	clk := testingclock.NewFakeClock(time.Now().Add(time.Minute))
	gc, err := garbagecollection.NewController(f.kube, f.kube, f.p, clk, events.NewFakeRecorder(10), nil, garbagecollection.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gc.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := f.p.Get(ctx, lost.Status.ProviderID); err == nil {
		t.Errorf("the lost instance %s is still running", lost.Status.ProviderID)
	}
	listed, err := f.p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := providerIDs(listed); !slices.Equal(got, []string{kept.Status.ProviderID}) {
		t.Errorf("instances after garbage collection %v, want only %s", got, kept.Status.ProviderID)
	}
}
