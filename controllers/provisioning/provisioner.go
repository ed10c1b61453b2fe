// Package provisioning turns pending pods into NodeClaims. It watches the pods kube-scheduler marks
// Unschedulable, batches them, simulates scheduling against the existing nodes, the in-flight
// NodeClaims and the NodePools (package scheduling), creates the NodeClaims the simulation plans,
// and tells every pod it could not place why, with an Event. A pod of a namespace bound to NodePools
// (package tenancy) is only ever planned onto those, whether or not the Pod webhooks saw it
// (state.BuildInput restricts it), and every NodeClaim goes through the tenancy gate
// (nodeclaimgate) as it is created. It launches nothing itself: the NodeClaim lifecycle controller
// does.
package provisioning

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/batcher"
	"github.com/joiner-dev/joiner/controllers/nodeclaimgate"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/controllers/state"
)

// ControllerName names the provisioner (logs, events).
const ControllerName = "joiner-provisioner"

// Defaults of Options.
const (
	DefaultBatchIdle        = time.Second
	DefaultBatchMaxDuration = 10 * time.Second
	DefaultNominationTTL    = 15 * time.Minute
	// Event reasons on pods.
	ReasonNominated          = "Nominated"
	ReasonFailedProvisioning = "FailedProvisioning"
	// ReasonNodePoolInvalid is the reason of the Event on a NodePool whose ValidationSucceeded
	// condition is False: the provisioner launches nothing from it until its spec is fixed.
	ReasonNodePoolInvalid = "NodePoolInvalid"
	maxEventNote          = 1000
)

// ErrNodeClaimsNotCreated is wrapped by the error of a round that could not create some of the
// NodeClaims it planned; the provisioner retries such a round after a backoff.
var ErrNodeClaimsNotCreated = errors.New("could not create every NodeClaim")

// retryMin is the first wait before retrying a round that could not create every NodeClaim.
const retryMin = time.Second

// provisioningPeriod is how often the provisioner runs a round when nothing triggers it, so that
// pods whose nomination expired are looked at again.
const provisioningPeriod = 30 * time.Second

// Options tune the provisioner; zero values mean the defaults above.
type Options struct {
	// BatchIdle closes a batch once no new pending pod arrived for this long.
	BatchIdle time.Duration
	// BatchMaxDuration closes a batch this long after it opened, however busy.
	BatchMaxDuration time.Duration
	// NominationTTL is how long a pod stays counted on the NodeClaim planned for it before it is
	// considered again (the NodeClaim's own liveness TTL normally ends this sooner).
	NominationTTL time.Duration
	// CapacityBuffer makes every round keep room for the units of the CapacityBuffers (buffers.go):
	// their virtual pods are placed after the real pending pods.
	CapacityBuffer bool
	// PlanForExpectedPods makes every round with pending pods also plan for the pods their
	// ReplicaSets, StatefulSets and Jobs are still to create (expected.go), as virtual pods placed
	// after the real ones and the buffers' units.
	PlanForExpectedPods bool
	// Scheduling tunes the simulation.
	Scheduling scheduling.Options
	// ModelDRARequests makes the simulation read pending pods' ResourceClaims (dra.go): false, the
	// default, packs them as if the claims did not exist (Karpenter's IGNORE_DRA_REQUESTS=true).
	ModelDRARequests bool
	// LaunchWorkers bounds how many NodeClaims of one round are created at once (launch.go); 0
	// means DefaultLaunchWorkers.
	LaunchWorkers int
}

// Provisioner is a leader-only manager Runnable that provisions in batches.
type Provisioner struct {
	Client        client.Client
	CloudProvider cloudprovider.CloudProvider
	Recorder      events.EventRecorder
	Clock         clock.Clock
	Log           logr.Logger
	Options       scheduling.Options
	Metrics       *Metrics

	gate          *nodeclaimgate.Gate
	batcher       *batcher.Batcher
	nominationTTL time.Duration
	// capacityBuffer is Options.CapacityBuffer.
	capacityBuffer bool
	// planForExpectedPods is Options.PlanForExpectedPods.
	planForExpectedPods bool
	mu                  sync.Mutex
	nominated           map[types.UID]nomination
	// modelDRARequests is Options.ModelDRARequests.
	modelDRARequests bool
	// launchWorkers is Options.LaunchWorkers with its default.
	launchWorkers int
}

type nomination struct {
	nodeClaim string
	at        time.Time
}

// New returns a provisioner; register it with SetupWithManager. reg receives its metrics (nil
// skips them); it fails only when they cannot be registered.
func New(c client.Client, cp cloudprovider.CloudProvider, recorder events.EventRecorder, clk clock.Clock, log logr.Logger, reg prometheus.Registerer, opts Options) (*Provisioner, error) {
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("provisioner metrics: %w", err)
	}
	gate, err := nodeclaimgate.New(c, recorder, log, reg, MetricsControllerName)
	if err != nil {
		return nil, fmt.Errorf("provisioner: %w", err)
	}
	workers, err := launchWorkers(opts.LaunchWorkers)
	if err != nil {
		return nil, err
	}
	clk = defaults.Clock(clk)
	if opts.BatchIdle == 0 {
		opts.BatchIdle = DefaultBatchIdle
	}
	if opts.BatchMaxDuration == 0 {
		opts.BatchMaxDuration = DefaultBatchMaxDuration
	}
	if opts.NominationTTL == 0 {
		opts.NominationTTL = DefaultNominationTTL
	}
	return &Provisioner{
		Client: c, CloudProvider: cp, Recorder: recorder, Clock: clk, Log: log, Options: opts.Scheduling,
		Metrics: m, gate: gate, modelDRARequests: opts.ModelDRARequests,
		batcher:             &batcher.Batcher{Idle: opts.BatchIdle, MaxDuration: opts.BatchMaxDuration, Period: provisioningPeriod, Clock: clk},
		nominationTTL:       opts.NominationTTL,
		capacityBuffer:      opts.CapacityBuffer,
		planForExpectedPods: opts.PlanForExpectedPods,
		launchWorkers:       workers,
		nominated:           map[types.UID]nomination{},
	}, nil
}

// SetupWithManager adds the provisioner and a pod watch that triggers it.
func (p *Provisioner) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(p); err != nil {
		return fmt.Errorf("add provisioner: %w", err)
	}
	if err := p.setupBufferTriggers(mgr); err != nil {
		return err
	}
	trigger := handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, _ workqueueAny) { p.maybeTrigger(e.Object) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, _ workqueueAny) { p.maybeTrigger(e.ObjectNew) },
	}
	// NodeClaims that go away (a failed launch, liveness) free their nominated pods.
	claimGone := handler.Funcs{DeleteFunc: func(context.Context, event.DeleteEvent, workqueueAny) { p.batcher.Trigger() }}
	return ctrl.NewControllerManagedBy(mgr).
		Named("provisioner-trigger").
		WatchesRawSource(sourceFor(mgr, &corev1.Pod{}, trigger)).
		Watches(&karpv1.NodeClaim{}, claimGone, builder.WithPredicates(predicate.Funcs{
			CreateFunc: func(event.CreateEvent) bool { return false },
			UpdateFunc: func(event.UpdateEvent) bool { return false },
		})).
		Watches(&karpv1.NodePool{}, handler.Funcs{
			CreateFunc: func(context.Context, event.CreateEvent, workqueueAny) { p.batcher.Trigger() },
			UpdateFunc: func(context.Context, event.UpdateEvent, workqueueAny) { p.batcher.Trigger() },
		}).
		WithOptions(controller.Options{}).
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return reconcile.Result{}, nil }))
}

func (p *Provisioner) maybeTrigger(obj client.Object) {
	if pod, ok := obj.(*corev1.Pod); ok && podpredicates.IsProvisionable(pod) {
		p.batcher.Trigger()
	}
}

// NeedLeaderElection makes provisioning run on the leader only.
func (p *Provisioner) NeedLeaderElection() bool { return true }

// Start provisions a batch at a time until ctx ends. A periodic round (every provisioningPeriod)
// catches pods whose nomination expired.
//
// A round that could not create some of its NodeClaims (the apiserver or a webhook refused them)
// is retried after a backoff that starts at retryMin and doubles up to provisioningPeriod, so that
// pending pods do not wait for an unrelated trigger.
func (p *Provisioner) Start(ctx context.Context) error {
	p.batcher.Trigger()
	var backoff time.Duration
	for p.batcher.Wait(ctx) {
		err := p.Provision(ctx)
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, ErrNodeClaimsNotCreated) {
			backoff = min(max(2*backoff, retryMin), provisioningPeriod)
			p.Log.Info("retrying a provisioning round that could not create every NodeClaim", "in", backoff.String(), "error", err.Error())
			p.retryAfter(ctx, backoff)
			continue
		}
		backoff = 0
		if err != nil {
			p.Log.Error(err, "provisioning failed")
		}
	}
	return nil
}

// retryAfter triggers a round after d, unless ctx ends first.
func (p *Provisioner) retryAfter(ctx context.Context, d time.Duration) {
	timer := p.Clock.NewTimer(d)
	go func() {
		defer timer.Stop()
		select {
		case <-ctx.Done():
		case <-timer.C():
			p.batcher.Trigger()
		}
	}()
}

// Provision runs one round: read the cluster, simulate, create NodeClaims, report failures.
func (p *Provisioner) Provision(ctx context.Context) error {
	start := p.Clock.Now()
	snapshot, err := state.ReadClusterState(ctx, p.Client)
	if err != nil {
		return err
	}
	nominated := p.currentNominations(snapshot)
	in, err := state.BuildInput(ctx, p.CloudProvider, snapshot, nominated, p.Options, p.Log)
	if err != nil {
		return err
	}
	draRound := p.modelDRA(ctx, &in, snapshot)
	buffers := p.readBuffers(ctx, snapshot)
	if len(in.Pods) == 0 && len(buffers.Pods) == 0 {
		p.Metrics.UnschedulablePods.WithLabelValues(MetricsControllerName).Set(float64(draRound.refused))
		return nil
	}
	p.reportInvalidNodePools(snapshot)
	p.reportTenancy(in.Pods, snapshot)
	expected := p.readExpected(ctx, snapshot)
	in.Pods = append(append(in.Pods, buffers.Pods...), expected...)
	results, err := scheduling.Solve(ctx, in)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("simulate scheduling: %w", err)
	}
	p.Metrics.SchedulingDuration.WithLabelValues(MetricsControllerName).Observe(p.Clock.Since(start).Seconds())
	results = p.settleExpected(p.settleBuffers(ctx, buffers, results), len(expected))
	created, createErrs := p.launch(ctx, results.NewNodeClaims, draRound)
	for _, pe := range results.PodErrors {
		p.event(pe.Pod, corev1.EventTypeWarning, ReasonFailedProvisioning, "%v", pe.Err)
	}
	p.Metrics.UnschedulablePods.WithLabelValues(MetricsControllerName).Set(float64(len(results.PodErrors) + draRound.refused))
	p.Log.V(1).Info("provisioning round", "pending", len(in.Pods), "nodeClaims", created, "unschedulable", len(results.PodErrors),
		"existingNodes", len(results.ExistingNodes), "duration", p.Clock.Since(start).String())
	if len(createErrs) > 0 {
		return fmt.Errorf("%w: %d of %d: %w", ErrNodeClaimsNotCreated, len(createErrs), len(results.NewNodeClaims), errors.Join(createErrs...))
	}
	return nil
}

// currentNominations drops nominations whose pod is bound or gone, whose NodeClaim is gone or
// Initialized, or that expired, and returns the rest.
func (p *Provisioner) currentNominations(s *state.ClusterState) map[types.UID]string {
	// Only NodeClaims in flight hold nominations: once one is Initialized its Node is there to
	// schedule on, kube-scheduler binds whichever pods it picks, and the simulation sees the pods
	// actually bound to it. A nomination kept past that would count a pod kube-scheduler placed
	// elsewhere (or not yet) on a node it may have filled with others, and no capacity would be
	// launched for that pod until the nomination expired.
	claims := map[string]bool{}
	for i := range s.NodeClaims {
		nc := &s.NodeClaims[i]
		if nc.DeletionTimestamp == nil && !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeInitialized) {
			claims[nc.Name] = true
		}
	}
	pending := map[types.UID]bool{}
	for i := range s.Pods {
		if s.Pods[i].Spec.NodeName == "" && !podpredicates.IsTerminal(&s.Pods[i]) {
			pending[s.Pods[i].UID] = true
		}
	}
	now := p.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[types.UID]string{}
	for uid, n := range p.nominated {
		if !pending[uid] || !claims[n.nodeClaim] || now.Sub(n.at) > p.nominationTTL {
			delete(p.nominated, uid)
			continue
		}
		out[uid] = n.nodeClaim
	}
	return out
}

func (p *Provisioner) nominate(pods []*corev1.Pod, nodeClaim string) {
	now := p.Clock.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pod := range pods {
		p.nominated[pod.UID] = nomination{nodeClaim: nodeClaim, at: now}
	}
}

// reportInvalidNodePools records, on every NodePool that BuildInput leaves out because its
// ValidationSucceeded condition is False, why no capacity is launched from it.
func (p *Provisioner) reportInvalidNodePools(s *state.ClusterState) {
	for i := range s.NodePools {
		np := &s.NodePools[i]
		if !state.Considered(np) {
			continue
		}
		if c := state.FailedValidation(np); c != nil {
			p.event(np, corev1.EventTypeWarning, ReasonNodePoolInvalid,
				"no capacity is launched from NodePool %s: its %s condition is False (%s): %s; fix its spec",
				np.Name, karpv1.ConditionTypeValidationSucceeded, c.Reason, c.Message)
		}
	}
}

// event records an Event about obj (a pod, or a NodePool), its note cut to maxEventNote.
func (p *Provisioner) event(obj runtime.Object, kind, reason, format string, args ...any) {
	if p.Recorder == nil {
		return
	}
	note := fmt.Sprintf(format, args...)
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	p.Recorder.Eventf(obj, nil, kind, reason, "Provision", "%s", note)
}

func summarize(names []string, n int) string {
	if len(names) <= n {
		return fmt.Sprint(names)
	}
	return fmt.Sprintf("%v and %d more", names[:n], len(names)-n)
}
