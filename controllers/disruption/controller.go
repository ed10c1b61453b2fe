package disruption

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/controllers/nodeclaimgate"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/controllers/state"
)

// ControllerName names the disruption controller (logs, events, the cloud provider's metrics).
const ControllerName = "disruption"

// Defaults of Options.
const (
	DefaultPollingPeriod       = 10 * time.Second
	DefaultValidationDelay     = 15 * time.Second
	DefaultCommandTimeout      = 10 * time.Minute
	DefaultConsolidatedRefresh = 5 * time.Minute
)

// Options tune the disruption controller. Zero values mean the defaults above.
type Options struct {
	// PollingPeriod is the time between passes that found nothing to do.
	PollingPeriod time.Duration
	// ValidationDelay is how long a consolidation decision waits before it is checked again and
	// carried out; pod churn within it cancels the decision. Negative means no delay.
	ValidationDelay time.Duration
	// CommandTimeout is how long a command may wait for its replacements to initialize before it
	// is rolled back.
	CommandTimeout time.Duration
	// ConsolidatedRefresh is how long a cluster found to have nothing to consolidate is not
	// re-examined while nothing in it changes (instance-type availability is not an event, so
	// it is re-examined at least this often).
	ConsolidatedRefresh time.Duration
	// Planner tunes the decisions (timeouts, candidate cap, churn guard).
	Planner planner.Options
	// Scheduling tunes the simulation; it must be the provisioner's, so that both agree.
	Scheduling scheduling.Options
	// CapacityBuffer counts the CapacityBuffers' units as pending pods of every simulation
	// (buffers.go), so that no command takes away the room the provisioner keeps for them.
	CapacityBuffer bool
	// PlanForExpectedPods counts the pods workloads are still to create as pending pods of every
	// simulation (expected.go), so that the nodes launched for them are kept until they arrive.
	PlanForExpectedPods bool
}

func (o Options) withDefaults() Options {
	o.PollingPeriod = defaults.Positive(o.PollingPeriod, DefaultPollingPeriod)
	if o.ValidationDelay == 0 {
		o.ValidationDelay = DefaultValidationDelay
	} else if o.ValidationDelay < 0 {
		o.ValidationDelay = 0
	}
	o.CommandTimeout = defaults.Positive(o.CommandTimeout, DefaultCommandTimeout)
	o.ConsolidatedRefresh = defaults.Positive(o.ConsolidatedRefresh, DefaultConsolidatedRefresh)
	return o
}

// Controller is the disruption loop, a leader-only manager Runnable.
type Controller struct {
	kube     client.Client
	reader   client.Reader
	cloud    cloudprovider.CloudProvider
	clock    clock.Clock
	recorder events.EventRecorder
	log      logr.Logger
	metrics  *Metrics
	gate     *nodeclaimgate.Gate
	planner  *planner.Planner
	opts     Options
	events   *dedupe

	mu sync.Mutex
	// queue holds the commands this process started, by ID, until the cache shows them done.
	queue map[string]*queued
	// moved maps the controller UIDs of pods disruption moved to when it moved them.
	moved map[types.UID]time.Time
	// consolidated is the fingerprint of the last state found to have nothing to do, and until
	// when that answer holds while the state keeps that fingerprint (nextClockChange).
	consolidated      uint64
	consolidatedUntil time.Time
	haveConsolidated  bool
	// changes counts the changes of what a pass reads, once watching (quiet.go); quietGen is the
	// count the last pass that found nothing to do started at.
	changes  atomic.Uint64
	quietGen uint64
	watching bool
}

// queued is a command this process started: its candidates and the replacements it created.
type queued struct {
	candidates   []string
	replacements []string
}

// NewController returns the disruption controller; register it with SetupWithManager. reader
// reads around the cache (the manager's API reader) to tell a replacement the cache has not seen
// yet from one that is gone. reg receives its metrics (nil skips them).
func NewController(kube client.Client, reader client.Reader, cloud cloudprovider.CloudProvider, clk clock.Clock, recorder events.EventRecorder, log logr.Logger, reg prometheus.Registerer, opts Options) (*Controller, error) {
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("disruption metrics: %w", err)
	}
	gate, err := nodeclaimgate.New(kube, recorder, log, reg, ControllerName)
	if err != nil {
		return nil, fmt.Errorf("disruption: %w", err)
	}
	clk = defaults.Clock(clk)
	opts = opts.withDefaults()
	return &Controller{
		kube: kube, reader: reader, cloud: cloud, clock: clk, recorder: recorder, log: log, metrics: m, gate: gate,
		planner: planner.New(opts.Planner, clk.Now), opts: opts, events: newDedupe(clk),
		queue: map[string]*queued{}, moved: map[types.UID]time.Time{},
	}, nil
}

// SetupWithManager adds the controller to mgr, with the watches that let passes over a quiet
// cluster skip reading it (quiet.go).
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("add the disruption controller: %w", err)
	}
	return c.watchChanges(mgr)
}

// NeedLeaderElection makes disruption run on the leader only.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start runs passes until ctx ends: right after a pass that started a command, soon after one
// that found the cache behind this process's own writes, otherwise every polling period.
func (c *Controller) Start(ctx context.Context) error {
	for {
		res, err := c.pass(ctx)
		if ctx.Err() != nil {
			return nil
		}
		wait := c.opts.PollingPeriod
		switch {
		case err != nil:
			c.log.Error(err, "disruption pass failed")
		case res == passStarted:
			continue
		case res == passUnsynced:
			wait = min(wait, cacheSyncRetry)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(wait):
		}
	}
}

// Pass runs one disruption pass: it moves the commands in flight along, removes stale disruption
// taints, plans, validates after the delay and starts the command. It reports whether it started
// one. It plans nothing while the cache does not show every replacement this process created.
func (c *Controller) Pass(ctx context.Context) (bool, error) {
	res, err := c.pass(ctx)
	return res == passStarted, err
}

// pass is Pass, saying why it started nothing. Over a quiet cluster it reads nothing (quiet.go).
func (c *Controller) pass(ctx context.Context) (passResult, error) {
	gen := c.changes.Load() // before the read: a change during it makes the next pass read again
	now := c.clock.Now()
	if c.stillQuiet(gen, now) {
		return passIdle, nil
	}
	snapshot, pdbs, err := c.read(ctx)
	if err != nil {
		return passIdle, err
	}
	if err := c.progress(ctx, snapshot, now); err != nil {
		return passIdle, err
	}
	if err := c.cleanupStale(ctx, snapshot); err != nil {
		return passIdle, err
	}
	if missing := c.unseenReplacements(snapshot.NodeClaims); len(missing) > 0 {
		c.log.V(1).Info("waiting for the cache to show the replacements this process created", "nodeclaims", missing)
		return passUnsynced, nil
	}
	key := fingerprint(snapshot, pdbs)
	if c.isConsolidated(key, now, gen) {
		return passIdle, nil
	}
	cluster, err := c.cluster(ctx, snapshot, pdbs, now)
	if err != nil {
		return passIdle, err
	}
	plan, err := c.planner.Plan(ctx, cluster)
	if err != nil {
		return passIdle, fmt.Errorf("plan disruption: %w", err)
	}
	c.observe(snapshot, plan)
	cmd := plan.Command
	if cmd == nil {
		// A plan held back by budgets holds until a budget window opens or closes, which
		// nextClockChange includes, or the cluster changes.
		c.markConsolidated(key, c.nextClockChange(snapshot, now), gen)
		return passIdle, nil
	}
	// Consolidation is checked again after the delay; drift and soft expiry are not (as Karpenter).
	if c.opts.ValidationDelay > 0 && (cmd.Reason == karpv1.DisruptionReasonEmpty || cmd.Reason == karpv1.DisruptionReasonUnderutilized) {
		if cmd, err = c.validate(ctx, cmd); cmd == nil || err != nil {
			return passIdle, err
		}
	}
	if err := c.start(ctx, cmd); err != nil {
		return passIdle, fmt.Errorf("start %s: %w", cmd, err)
	}
	return passStarted, nil
}

// validate waits the validation delay, reads the cluster again and re-checks cmd; it returns the
// command to carry out, nil when validation failed.
func (c *Controller) validate(ctx context.Context, cmd *planner.Command) (*planner.Command, error) {
	select {
	case <-ctx.Done():
		return nil, nil
	case <-c.clock.After(c.opts.ValidationDelay):
	}
	snapshot, pdbs, err := c.read(ctx)
	if err != nil {
		return nil, err
	}
	cluster, err := c.cluster(ctx, snapshot, pdbs, c.clock.Now())
	if err != nil {
		return nil, err
	}
	valid, reason, why, err := c.planner.Validate(ctx, cluster, cmd)
	if err != nil {
		return nil, fmt.Errorf("validate %s: %w", cmd, err)
	}
	if valid == nil {
		c.metrics.FailedValidations.WithLabelValues(cmd.Type).Add(float64(len(cmd.Candidates)))
		c.log.Info("abandoning disruption, it is no longer valid", "command", cmd.String(), "reason", reason, "detail", why)
		if cmd.Reason != karpv1.DisruptionReasonEmpty {
			objs := c.objectsOf(snapshot, cmd)
			for _, obj := range objs {
				c.event(obj, corev1.EventTypeNormal, "ConsolidationRejected", rejectedTTL,
					"Consolidation rejected: %s, reason: %s (savings: $%.4f/h)", cmd.String(), reason, cmd.Savings)
			}
		}
		return nil, nil
	}
	if dropped := len(cmd.Candidates) - len(valid.Candidates); dropped > 0 {
		c.metrics.FailedValidations.WithLabelValues(cmd.Type).Add(float64(dropped))
	}
	return valid, nil
}

// read lists what a pass needs.
func (c *Controller) read(ctx context.Context) (*state.ClusterState, []policyv1.PodDisruptionBudget, error) {
	return ReadState(ctx, c.kube)
}

// ReadState lists what a disruption pass reads: the provisioner's cluster state and the
// PodDisruptionBudgets.
func ReadState(ctx context.Context, kube client.Reader) (*state.ClusterState, []policyv1.PodDisruptionBudget, error) {
	snapshot, err := state.ReadClusterState(ctx, kube)
	if err != nil {
		return nil, nil, fmt.Errorf("read the cluster: %w", err)
	}
	var pdbs policyv1.PodDisruptionBudgetList
	if err := kube.List(ctx, &pdbs); err != nil {
		return nil, nil, fmt.Errorf("list PodDisruptionBudgets: %w", err)
	}
	return snapshot, pdbs.Items, nil
}

// NewCluster builds the planner's view of state: the provisioner's scheduling input for the same
// state (so a disruption decision and a scale-up decision agree on where pods fit), its nodes
// and the PodDisruptionBudgets. The controller and the dry-run view both build it this way.
func NewCluster(ctx context.Context, cloud cloudprovider.CloudProvider, snapshot *state.ClusterState, pdbs []policyv1.PodDisruptionBudget, sched scheduling.Options, now time.Time, log logr.Logger) (*planner.Cluster, error) {
	in, err := state.BuildInput(ctx, cloud, snapshot, nil, sched, log)
	if err != nil {
		return nil, fmt.Errorf("build the scheduling input: %w", err)
	}
	return planner.NewCluster(now, snapshot, in, pdbs), nil
}

// cluster is NewCluster with the recently moved workloads and the commands held in memory.
func (c *Controller) cluster(ctx context.Context, snapshot *state.ClusterState, pdbs []policyv1.PodDisruptionBudget, now time.Time) (*planner.Cluster, error) {
	cl, err := NewCluster(ctx, c.cloud, snapshot, pdbs, c.opts.Scheduling, now, c.log.V(1))
	if err != nil {
		return nil, err
	}
	c.addBufferPods(ctx, snapshot, cl)
	c.addExpectedPods(ctx, snapshot, cl)
	c.mu.Lock()
	defer c.mu.Unlock()
	cooldown := c.planner.Options().Cooldown
	for uid, at := range c.moved {
		if now.Sub(at) > cooldown {
			delete(c.moved, uid)
		}
	}
	cl.RecentlyMoved = maps.Clone(c.moved)
	cl.InQueue = map[string]bool{}
	for _, q := range c.queue {
		for _, name := range q.candidates {
			cl.InQueue[name] = true
		}
	}
	return cl, nil
}

// isConsolidated reports whether the state is the one last found to have nothing to do, and that
// answer still holds at now; if so, the changes up to gen changed nothing, and quiet passes may
// start from there.
func (c *Controller) isConsolidated(key uint64, now time.Time, gen uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.haveConsolidated && c.consolidated == key && now.Before(c.consolidatedUntil)
	if ok {
		c.quietGen = gen
	}
	return ok
}

// markConsolidated records that the state with fingerprint key, read at change count gen, has
// nothing to do until until.
func (c *Controller) markConsolidated(key uint64, until time.Time, gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.consolidated, c.consolidatedUntil, c.quietGen, c.haveConsolidated = key, until, gen, true
}

// fingerprint hashes what disruption decisions depend on: pods and where they are bound, nodes and
// their readiness and taints, NodeClaims and their conditions and annotations, NodePools and PDBs.
// Heartbeats and other status noise are left out, so a quiet cluster keeps its fingerprint.
func fingerprint(s *state.ClusterState, pdbs []policyv1.PodDisruptionBudget) uint64 {
	h := fnv.New64a()
	write := func(parts ...string) {
		for _, p := range parts {
			_, _ = h.Write([]byte(p))
			_, _ = h.Write([]byte{0})
		}
	}
	for i := range s.Pods {
		p := &s.Pods[i]
		write("pod", string(p.UID), p.Spec.NodeName, string(p.Status.Phase), strconv.FormatBool(p.DeletionTimestamp != nil), p.Annotations[karpv1.DoNotDisruptAnnotationKey])
	}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		var taints []string
		for _, t := range n.Spec.Taints {
			taints = append(taints, t.ToString())
		}
		ready := ""
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				ready = string(cond.Status)
			}
		}
		write("node", n.Name, ready, strings.Join(taints, ","), strconv.FormatBool(n.DeletionTimestamp != nil), n.Annotations[karpv1.DoNotDisruptAnnotationKey])
	}
	for i := range s.NodeClaims {
		nc := &s.NodeClaims[i]
		write("nodeclaim", nc.Name, strconv.FormatBool(nc.DeletionTimestamp != nil), nc.Annotations[planner.CommandAnnotationKey])
		for _, t := range []string{karpv1.ConditionTypeInitialized, karpv1.ConditionTypeConsolidatable, karpv1.ConditionTypeInstanceTerminating, karpv1.ConditionTypeDrifted, planner.ConditionTypeExpired} {
			write(strconv.FormatBool(meta.IsStatusConditionTrue(nc.Status.Conditions, t)))
		}
	}
	for i := range s.NodePools {
		write("nodepool", s.NodePools[i].Name, strconv.FormatInt(s.NodePools[i].Generation, 10))
	}
	for i := range pdbs {
		write("pdb", pdbs[i].Namespace, pdbs[i].Name, strconv.Itoa(int(pdbs[i].Status.DisruptionsAllowed)))
	}
	return h.Sum64()
}
