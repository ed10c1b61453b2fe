package disruption

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
)

// countingLists is a client that counts its List calls: a pass that reads the cluster lists.
type countingLists struct {
	client.Client
	lists atomic.Int32
}

func (c *countingLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.lists.Add(1)
	return c.Client.List(ctx, list, opts...)
}

// TestQuietPassesWakeOnTheClock: a drifted node is held back by something that ends with time (a
// budget window, a pod's do-not-disrupt duration). The pass that finds nothing to do is the last
// to read the cluster until it changes or that time comes: passes before it read nothing, a change
// makes the next pass read again, and the first pass after it replaces the node.
func TestQuietPassesWakeOnTheClock(t *testing.T) {
	start := time.Now().UTC().Truncate(time.Minute)
	it := fake.NewInstanceType(fake.InstanceTypeOptions{Name: "fake-4cpu",
		Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
		Offerings: cloudprovider.Offerings{cloudprovider.NewOffering(fake.Zone1, karpv1.CapacityTypeOnDemand, 0.15, true)}})
	cases := []struct {
		name string
		// hold makes the node's drift wait until the time it returns.
		hold func(t *testing.T, pool, podNamespace, podName string, now time.Time) time.Time
	}{
		{name: "budget window closes", hold: func(t *testing.T, pool, _, _ string, _ time.Time) time.Time {
			setBudgets(t, pool, karpv1.Budget{Nodes: "0", Schedule: ptr.To(fmt.Sprintf("%d %d * * *", start.Minute(), start.Hour())),
				Duration: &metav1.Duration{Duration: 30 * time.Minute}})
			return start.Add(30 * time.Minute)
		}},
		{name: "do-not-disrupt duration runs out", hold: func(t *testing.T, _, ns, name string, now time.Time) time.Time {
			protect(t, ns, name, "20m", now)
			return now.Add(20 * time.Minute)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			t.Cleanup(func() { env.Wipe(t) })
			pool := createDriftPool(t)
			ns := env.Namespace(t)
			createDriftedNode(t, pool, "node-q", it)
			createAntiAffinePod(t, ns, "node-q")
			clk := clocktesting.NewFakeClock(start.Add(time.Minute))
			until := tc.hold(t, pool, ns, "web-node-q", clk.Now())
			kube := &countingLists{Client: env.Client}
			c, err := NewController(kube, env.Client, fake.New(it), clk, events.NewFakeRecorder(1000), testr.New(t), nil,
				Options{ValidationDelay: -1, ConsolidatedRefresh: time.Hour, Planner: planner.Options{Cooldown: -1}})
			if err != nil {
				t.Fatal(err)
			}
			c.watching = true // as watchChanges sets it; this test counts the changes itself

			steps := []struct {
				what      string
				at        time.Time
				change    bool
				want      passResult
				wantReads bool
			}{
				{what: "first pass", at: clk.Now(), want: passIdle, wantReads: true},
				{what: "quiet pass", at: clk.Now().Add(5 * time.Minute), want: passIdle},
				{what: "quiet pass just before the hold ends", at: until.Add(-time.Second), want: passIdle},
				{what: "pass after a change", at: until.Add(-time.Second), change: true, want: passIdle, wantReads: true},
				{what: "quiet pass after that", at: until.Add(-time.Second), want: passIdle},
				{what: "pass once the hold ended", at: until.Add(time.Second), want: passStarted, wantReads: true},
			}
			for _, s := range steps {
				clk.SetTime(s.at)
				if s.change {
					c.changes.Add(1)
				}
				before := kube.lists.Load()
				res, err := c.pass(ctx)
				if err != nil {
					t.Fatalf("%s: %v", s.what, err)
				}
				if read := kube.lists.Load() > before; res != s.want || read != s.wantReads {
					t.Fatalf("%s at %s: result %v, read the cluster %v; want %v, %v", s.what, s.at.Format(time.TimeOnly), res, read, s.want, s.wantReads)
				}
			}
			if got := replacements(t); len(got) != 1 {
				t.Errorf("%d replacements (%v), want the drifted node's one", len(got), got)
			}
		})
	}
}

// TestPassesReadWithoutWatches: a controller not set up with a manager counts no changes, so
// every pass reads the cluster, as before quiet passes.
func TestPassesReadWithoutWatches(t *testing.T) {
	t.Cleanup(func() { env.Wipe(t) })
	kube := &countingLists{Client: env.Client}
	clk := clocktesting.NewFakeClock(time.Now())
	c, err := NewController(kube, env.Client, fake.New(), clk, events.NewFakeRecorder(10), testr.New(t), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		before := kube.lists.Load()
		if _, err := c.pass(t.Context()); err != nil {
			t.Fatal(err)
		}
		if kube.lists.Load() == before {
			t.Fatalf("pass %d read nothing without watches", i+1)
		}
	}
}

// setBudgets replaces the NodePool's disruption budgets.
func setBudgets(t *testing.T, pool string, budgets ...karpv1.Budget) {
	t.Helper()
	np := &karpv1.NodePool{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Name: pool}, np); err != nil {
		t.Fatal(err)
	}
	np.Spec.Disruption.Budgets = budgets
	if err := env.Client.Update(t.Context(), np); err != nil {
		t.Fatalf("set the budgets of NodePool %s: %v", pool, err)
	}
}

// protect gives the pod a karpenter.sh/do-not-disrupt duration and records it as started at.
func protect(t *testing.T, ns, name, duration string, at time.Time) {
	t.Helper()
	pod := &corev1.Pod{}
	if err := env.Client.Get(t.Context(), client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	pod.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: duration}
	if err := env.Client.Update(t.Context(), pod); err != nil {
		t.Fatalf("annotate pod %s: %v", name, err)
	}
	pod.Status.StartTime = &metav1.Time{Time: at}
	if err := env.Client.Status().Update(t.Context(), pod); err != nil {
		t.Fatalf("start pod %s: %v", name, err)
	}
}
