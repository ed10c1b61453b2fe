package provisioning

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/testsupport/eventstest"
	"github.com/joiner-dev/joiner/testsupport/metricstest"
)

// admissionDelay is how long the API server takes to admit each NodeClaim in TestParallelLaunch,
// as slow admission webhooks would.
const admissionDelay = 150 * time.Millisecond

// slowCreates is a client that delays every NodeClaim create by admissionDelay and counts how
// many are in flight at once; the creates of NodeClaims of NodePool failPool fail after the delay.
type slowCreates struct {
	client.Client
	inFlight, maxInFlight, calls, stored atomic.Int32
	failPool                             string
	// crash, when set, is called once crashAfter NodeClaims were stored: the process dies there.
	crash      func()
	crashAfter int32
}

func (s *slowCreates) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	nc, ok := obj.(*karpv1.NodeClaim)
	if !ok {
		return s.Client.Create(ctx, obj, opts...)
	}
	s.calls.Add(1)
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.maxInFlight.Load(); n > m && !s.maxInFlight.CompareAndSwap(m, n); m = s.maxInFlight.Load() {
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(admissionDelay):
	}
	if nc.Labels[karpv1.NodePoolLabelKey] == s.failPool {
		return errors.New("admission webhook denied the request")
	}
	if err := s.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	if s.stored.Add(1) == s.crashAfter && s.crash != nil {
		s.crash()
	}
	return nil
}

// startLaunchBed starts the API server of startDRABed, whose NodePool "default" launches, and adds
// the NodePool "broken", a copy of it whose creates TestParallelLaunch fails.
func startLaunchBed(t *testing.T) *draBed {
	t.Helper()
	b := startDRABed(t)
	np := &karpv1.NodePool{}
	if err := b.c.Get(t.Context(), client.ObjectKey{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	broken := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: np.Spec}
	if err := b.c.Create(t.Context(), broken); err != nil {
		t.Fatalf("create NodePool broken: %v", err)
	}
	return b
}

// spreadPods creates n pending pods of app that each need a node of their own (required
// anti-affinity on the hostname) from NodePool pool, marked Unschedulable as kube-scheduler would.
func spreadPods(t *testing.T, c client.Client, app, pool string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", app, i), Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{
				NodeSelector: map[string]string{karpv1.NodePoolLabelKey: pool},
				Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}},
				Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
		if err := c.Create(ctx, pod); err != nil {
			t.Fatalf("create pod %s: %v", pod.Name, err)
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			LastTransitionTime: metav1.Now()}}
		if err := c.Status().Update(ctx, pod); err != nil {
			t.Fatalf("mark pod %s unschedulable: %v", pod.Name, err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	}
}

// TestParallelLaunch runs provisioning rounds of one NodeClaim per pod against a real API server
// whose NodeClaim admission takes admissionDelay: the round's creates overlap, never more than
// LaunchWorkers at once; each created NodeClaim is counted, nominates its pod and tells it so; a
// NodePool whose creates fail gets FailedProvisioning Events and an aggregated error while the
// others are created; and a crash in the middle of a round leaves no duplicate (crashMidRound).
func TestParallelLaunch(t *testing.T) {
	bed := startLaunchBed(t)
	base := bed.c
	cases := []struct {
		name                     string
		workers                  int
		fast, broken             int
		wantMaxInFlight          int32 // exact when minInFlight is 0
		minInFlight, maxInFlight int32 // bounds when set
	}{
		{name: "one worker creates one at a time", workers: 1, fast: 4, wantMaxInFlight: 1},
		{name: "bounded by the workers", workers: 3, fast: 9, minInFlight: 2, maxInFlight: 3},
		{name: "default workers", fast: 14, minInFlight: 2, maxInFlight: DefaultLaunchWorkers},
		{name: "failed creates do not stop the others", workers: 4, fast: 5, broken: 3, minInFlight: 2, maxInFlight: 4},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			slow := &slowCreates{Client: base, failPool: "broken"}
			spreadPods(t, base, fmt.Sprintf("fast%d", i), "default", tc.fast)
			spreadPods(t, base, fmt.Sprintf("broken%d", i), "broken", tc.broken)
			recorder := events.NewFakeRecorder(200)
			reg := prometheus.NewRegistry()
			p, err := New(slow, bed.provider, recorder, clocktesting.NewFakeClock(testNow), testr.New(t), reg, Options{LaunchWorkers: tc.workers})
			if err != nil {
				t.Fatal(err)
			}
			err = p.Provision(ctx)
			t.Cleanup(func() { _ = base.DeleteAllOf(context.Background(), &karpv1.NodeClaim{}) })

			if tc.broken == 0 && err != nil {
				t.Fatalf("Provision: %v", err)
			}
			if tc.broken > 0 && (!errors.Is(err, ErrNodeClaimsNotCreated) || !strings.Contains(fmt.Sprint(err), fmt.Sprintf("%d of %d", tc.broken, tc.fast+tc.broken))) {
				t.Fatalf("Provision error %v, want %v for %d of %d", err, ErrNodeClaimsNotCreated, tc.broken, tc.fast+tc.broken)
			}
			if got := slow.calls.Load(); got != int32(tc.fast+tc.broken) {
				t.Errorf("%d NodeClaim creates, want one per pod (%d)", got, tc.fast+tc.broken)
			}
			got := slow.maxInFlight.Load()
			t.Logf("%d NodeClaim creates, at most %d in flight", slow.calls.Load(), got)
			if tc.minInFlight == 0 && got != tc.wantMaxInFlight {
				t.Errorf("at most %d creates in flight, want %d", got, tc.wantMaxInFlight)
			}
			if tc.minInFlight > 0 && (got < tc.minInFlight || got > tc.maxInFlight) {
				t.Errorf("at most %d creates in flight, want between %d and %d", got, tc.minInFlight, tc.maxInFlight)
			}
			list := &karpv1.NodeClaimList{}
			if err := base.List(ctx, list); err != nil {
				t.Fatal(err)
			}
			for _, nc := range list.Items {
				if pool := nc.Labels[karpv1.NodePoolLabelKey]; pool != "default" {
					t.Errorf("NodeClaim %s of NodePool %s stored, want default only", nc.Name, pool)
				}
			}
			if len(list.Items) != tc.fast {
				t.Errorf("%d NodeClaims stored, want %d", len(list.Items), tc.fast)
			}
			if n := metricstest.Sum(t, reg, "karpenter_nodeclaims_created_total", map[string]string{"nodepool": "default"}); n != float64(tc.fast) {
				t.Errorf("karpenter_nodeclaims_created_total{nodepool=default} = %v, want %d", n, tc.fast)
			}
			p.mu.Lock()
			nominated := len(p.nominated)
			p.mu.Unlock()
			if nominated != tc.fast {
				t.Errorf("%d pods nominated, want %d", nominated, tc.fast)
			}
			var nominatedEvents, failedEvents int
			for _, e := range eventstest.Drain(recorder) {
				nominatedEvents += strings.Count(e, ReasonNominated)
				failedEvents += strings.Count(e, ReasonFailedProvisioning)
			}
			if nominatedEvents != tc.fast || failedEvents != tc.broken {
				t.Errorf("%d %s and %d %s Events, want %d and %d", nominatedEvents, ReasonNominated, failedEvents, ReasonFailedProvisioning, tc.fast, tc.broken)
			}
		})
	}
	t.Run("a crash mid-round leaves no duplicate", func(t *testing.T) { crashMidRound(t, bed) })
}

// crashMidRound: a provisioner that dies (its context ends) after 3 of the round's 9 NodeClaims
// were stored, with others in flight, leaves a subset of the plan; the next round of a fresh
// provisioner (no nominations in memory, as after a restart) counts the stored NodeClaims as
// in-flight capacity and creates only the missing ones: one NodeClaim per pod, none twice.
func crashMidRound(t *testing.T, bed *draBed) {
	const pods = 9
	spreadPods(t, bed.c, "crash", "default", pods)
	ctx, crash := context.WithCancel(context.Background())
	defer crash()
	slow := &slowCreates{Client: bed.c, crash: crash, crashAfter: 3}
	p, err := New(slow, bed.provider, events.NewFakeRecorder(200), clocktesting.NewFakeClock(testNow), testr.New(t), prometheus.NewRegistry(), Options{LaunchWorkers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Provision(ctx); err == nil {
		t.Fatal("Provision survived the crash; want the round cut short")
	}
	t.Cleanup(func() { _ = bed.c.DeleteAllOf(context.Background(), &karpv1.NodeClaim{}) })
	list := &karpv1.NodeClaimList{}
	if err := bed.c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	before := len(list.Items)
	t.Logf("%d of %d NodeClaims stored before the crash", before, pods)
	if before < 3 || before >= pods {
		t.Fatalf("%d NodeClaims stored before the crash, want 3 up to the 4 in flight, fewer than %d", before, pods)
	}
	restarted, err := New(bed.c, bed.provider, events.NewFakeRecorder(200), clocktesting.NewFakeClock(testNow), testr.New(t), prometheus.NewRegistry(), Options{LaunchWorkers: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := restarted.Provision(context.Background()); err != nil {
		t.Fatalf("Provision after the restart: %v", err)
	}
	if err := bed.c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != pods {
		t.Fatalf("%d NodeClaims for %d pods that each need their own node (%d stored before the crash): want one each, none twice", len(list.Items), pods, before)
	}
}

// TestLaunchWorkersOption: zero means the default, a positive count is kept, and a negative one is
// refused with an error naming the option.
func TestLaunchWorkersOption(t *testing.T) {
	cases := []struct {
		in, want int
		wantErr  bool
	}{{in: 0, want: DefaultLaunchWorkers}, {in: 1, want: 1}, {in: 32, want: 32}, {in: -1, wantErr: true}}
	for _, tc := range cases {
		got, err := launchWorkers(tc.in)
		if tc.wantErr {
			if err == nil || !strings.Contains(err.Error(), "LaunchWorkers") {
				t.Errorf("launchWorkers(%d) error %v, want one naming LaunchWorkers", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("launchWorkers(%d) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}
