package provisioning

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

// TestRetryAfterFailedCreate: a round whose NodeClaims the apiserver refuses (here the first
// refuses) is retried after retryMin on the provisioner's clock, without any other trigger, and
// the retry creates the NodeClaim.
func TestRetryAfterFailedCreate(t *testing.T) {
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	var creates, refused atomic.Int32
	c := ctrlfake.NewClientBuilder().WithScheme(s).
		WithObjects(nodePoolObject("default"), podObject("pending")).
		WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if _, ok := obj.(*karpv1.NodeClaim); ok && creates.Add(1) == 1 {
				refused.Add(1)
				return errors.New("webhook unavailable")
			}
			return c.Create(ctx, obj, opts...)
		}}).Build()
	clk := clocktesting.NewFakeClock(testNow)
	p, err := New(c, fake.New(fake.InstanceTypes(4)...), events.NewFakeRecorder(100), clk, logr.Discard(), nil,
		Options{BatchIdle: 100 * time.Millisecond, BatchMaxDuration: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Start(ctx) }()
	defer func() { cancel(); <-done }()

	// Step the clock in small steps (well below provisioningPeriod, so no periodic round helps)
	// until the NodeClaim exists.
	stepped := time.Duration(0)
	created := false
	err = wait.PollUntilContextTimeout(ctx, time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		list := &karpv1.NodeClaimList{}
		if err := c.List(ctx, list); err != nil {
			return false, err
		}
		if created = len(list.Items) == 1; created {
			return true, nil
		}
		if clk.HasWaiters() {
			clk.Step(50 * time.Millisecond)
			stepped += 50 * time.Millisecond
		}
		return false, nil
	})
	if created {
		if refused.Load() != 1 {
			t.Fatalf("%d creates refused, want the first one", refused.Load())
		}
		if stepped >= provisioningPeriod {
			t.Fatalf("the NodeClaim was created after %s of the provisioner's clock: by the periodic round, not the retry", stepped)
		}
		return
	}
	t.Fatalf("no NodeClaim after a refused create (%d creates, %s of the provisioner's clock): %v", creates.Load(), stepped, err)
}
