package planner

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/disruption/budget"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

// Consolidation types, the consolidation_type label of Karpenter's disruption metrics.
const (
	TypeEmpty  = "empty"
	TypeMulti  = "multi"
	TypeSingle = "single"
	// TypeDrift and TypeExpired are not consolidation: their consolidation_type label is "".
	TypeDrift   = "drift"
	TypeExpired = "expired"
)

// DisruptionReasonExpired is the DisruptionReason of Joiner's soft expiry. Budgets have no such
// reason: soft expiry consumes the Drifted budgets.
const DisruptionReasonExpired karpv1.DisruptionReason = "Expired"

// ConditionTypeExpired is Joiner's NodeClaim condition that soft expiry sets once a NodeClaim of a
// NodePool with graceful expiration is past its (spread) expiry.
const ConditionTypeExpired = karpv1.ConditionTypeExpired

// Defaults of Options.
const (
	DefaultMultiNodeMaxCandidates = 100
	DefaultMultiNodeTimeout       = time.Minute
	DefaultSingleNodeTimeout      = 3 * time.Minute
	DefaultMinSavingsFraction     = 0.05
	DefaultCooldown               = 10 * time.Minute
	// DefaultMaxReplacementsPercent lets m nodes be replaced by up to 1.5·m cheaper ones: after
	// pods have been moved into whatever room there was, the cheapest repacking of a set of
	// mismatched nodes often takes a few more, smaller nodes.
	DefaultMaxReplacementsPercent = 150
)

// Options tune a pass. Zero values mean the defaults above.
type Options struct {
	// MultiNodeMaxCandidates caps how many nodes multi-node consolidation considers at once
	// (Karpenter hard-codes 100).
	MultiNodeMaxCandidates int
	// MaxReplacementsPercent bounds how many replacements a multi-node command may launch, in
	// percent of the nodes it replaces, rounded down, and never below one (m→1, Karpenter's).
	// 100 means never more nodes than before; below 100, fewer. Negative means 100. Single-node
	// consolidation always replaces one node by at most one.
	MaxReplacementsPercent int
	// MultiNodeTimeout and SingleNodeTimeout bound the simulations of each method; on timeout
	// multi-node returns the best command found so far and single-node returns none.
	MultiNodeTimeout, SingleNodeTimeout time.Duration
	// MinSavingsFraction is the churn guard's margin: replacements, at their worst launch price,
	// must cost less than (1 - MinSavingsFraction) of the nodes they replace. Negative means 0
	// (Karpenter's rule: strictly cheaper).
	MinSavingsFraction float64
	// MinSavings is an absolute margin in $/h on top of MinSavingsFraction.
	MinSavings float64
	// Cooldown is how long a node launched by a disruption, and the new pods of a workload a
	// disruption moved, are left alone by consolidation of underutilized nodes. Negative disables
	// it.
	Cooldown time.Duration
	// SpotToSpot allows replacing spot nodes with (cheaper) spot nodes (Karpenter's
	// SpotToSpotConsolidation feature gate, off by default). Deleting spot nodes is always allowed.
	SpotToSpot bool
	// Workers is how many single-node simulations run at once (0: GOMAXPROCS). Candidates are
	// still decided in order: the command is the one a single worker would find.
	Workers int
}

func (o Options) withDefaults() Options {
	o.MultiNodeMaxCandidates = defaults.Positive(o.MultiNodeMaxCandidates, DefaultMultiNodeMaxCandidates)
	if o.MaxReplacementsPercent == 0 {
		o.MaxReplacementsPercent = DefaultMaxReplacementsPercent
	} else if o.MaxReplacementsPercent < 0 {
		o.MaxReplacementsPercent = 100
	}
	o.MultiNodeTimeout = defaults.Positive(o.MultiNodeTimeout, DefaultMultiNodeTimeout)
	o.SingleNodeTimeout = defaults.Positive(o.SingleNodeTimeout, DefaultSingleNodeTimeout)
	if o.MinSavingsFraction == 0 {
		o.MinSavingsFraction = DefaultMinSavingsFraction
	} else if o.MinSavingsFraction < 0 {
		o.MinSavingsFraction = 0
	}
	if o.Cooldown == 0 {
		o.Cooldown = DefaultCooldown
	}
	o.Workers = defaults.Positive(o.Workers, runtime.GOMAXPROCS(0))
	return o
}

// Planner computes disruption passes. It holds no state between passes and is safe for
// concurrent use.
type Planner struct {
	opts Options
	// now reads the clock for the methods' timeouts; passes otherwise use Cluster.Now.
	now func() time.Time
}

// New returns a Planner. now is read for the methods' timeouts (nil means time.Now); a test passes
// a fake clock's Now.
func New(opts Options, now func() time.Time) *Planner {
	if now == nil {
		now = time.Now
	}
	return &Planner{opts: opts.withDefaults(), now: now}
}

// Options returns the options in effect.
func (p *Planner) Options() Options { return p.opts }

// Command is one disruption decision: delete the candidates, or replace them with the
// replacements.
type Command struct {
	// ID identifies the command; the orchestration queue sets it.
	ID string
	// Reason is Empty, Underutilized, Drifted or Expired.
	Reason karpv1.DisruptionReason
	// Type is TypeEmpty, TypeMulti, TypeSingle, TypeDrift or TypeExpired.
	Type string
	// Candidates are the nodes to remove.
	Candidates []*Candidate
	// Replacements are the NodeClaims to launch first (none for a delete).
	Replacements []*scheduling.NodeClaimPlan
	// Savings is the estimated saving in $/h.
	Savings float64
	// Results is the simulation behind the command (nil for emptiness): where every pod goes.
	Results *scheduling.Results
}

// Decision is "delete" or "replace".
func (c *Command) Decision() string {
	if len(c.Replacements) == 0 {
		return "delete"
	}
	return "replace"
}

// NodePoolNames are the candidates' NodePools, sorted.
func (c *Command) NodePoolNames() []string {
	var out []string
	for _, cand := range c.Candidates {
		if !slices.Contains(out, cand.nodePool.Name) {
			out = append(out, cand.nodePool.Name)
		}
	}
	slices.Sort(out)
	return out
}

// String describes the command as Karpenter logs it, such as
// "Underutilized: replace: nodepools=[default]: [n1 n2] -> [1 replacement] (savings: $0.1200/h)".
func (c *Command) String() string {
	names := make([]string, len(c.Candidates))
	for i, cand := range c.Candidates {
		names[i] = cand.Name()
	}
	s := fmt.Sprintf("%s: %s: nodepools=[%s]: [%s]", c.Reason, c.Decision(), strings.Join(c.NodePoolNames(), " "), strings.Join(names, " "))
	if len(c.Replacements) > 0 {
		word := "replacements"
		if len(c.Replacements) == 1 {
			word = "replacement"
		}
		s += fmt.Sprintf(" -> [%d %s]", len(c.Replacements), word)
	}
	return s + fmt.Sprintf(" (savings: $%.4f/h)", c.Savings)
}

// Plan is the outcome of one pass.
type Plan struct {
	// Command is what to do, nil when nothing is worth doing.
	Command *Command
	// Verdicts say, for the nodes the pass looked at and left alone, why.
	Verdicts []Verdict
	// Allowed is, per NodePool and reason, how many more nodes budgets allow to disrupt, and
	// BudgetValue the budget before the disrupting nodes are subtracted.
	Allowed, BudgetValue map[string]map[karpv1.DisruptionReason]int
	// Disrupting counts, per NodePool, the initialized nodes that consume its budgets: NotReady,
	// being deleted, or held by a command.
	Disrupting map[string]int
	// BudgetErrors are NodePools whose budgets are invalid (they allow nothing: fail closed).
	BudgetErrors map[string]error
	// ConstrainedByBudgets is set when a budget kept a candidate out: such a pass must not be
	// remembered as "nothing to do".
	ConstrainedByBudgets bool
	// Eligible counts the candidates of each method.
	Eligible map[string]int
	// TimedOut names the methods that ran out of time.
	TimedOut []string
	// Durations are how long each method took.
	Durations map[string]time.Duration
}

// Verdict returns the verdict of the node, if the pass gave one.
func (p *Plan) Verdict(node string) (Verdict, bool) {
	for _, v := range p.Verdicts {
		if v.Node == node {
			return v, true
		}
	}
	return Verdict{}, false
}

// Plan runs one pass over c: emptiness, drift, soft expiry, then multi-node and single-node
// consolidation; the first method that finds something returns its command.
func (p *Planner) Plan(ctx context.Context, c *Cluster) (*Plan, error) {
	plan := &Plan{Eligible: map[string]int{}, Durations: map[string]time.Duration{}}
	ps, err := newPass(c)
	if err != nil {
		return nil, err
	}
	p.budgets(c, plan)
	nominated, err := ps.nominated(ctx)
	if err != nil {
		return nil, err
	}
	cands, verdicts := p.candidates(c, ps.infos, nominated)
	ps.eventual = cands.eventual
	plan.Verdicts = verdicts
	verdictOf := map[string]bool{}
	for _, v := range verdicts {
		verdictOf[v.Node] = true
	}
	var note noter = func(cand *Candidate, reason, msg string) {
		if verdictOf[cand.Name()] {
			return
		}
		verdictOf[cand.Name()] = true
		plan.Verdicts = append(plan.Verdicts, Verdict{Node: cand.Name(), NodeClaim: cand.node.NodeClaim.Name, Reason: reason, Message: msg})
	}
	methods := []struct {
		name string
		run  func(context.Context, *pass, []*Candidate, *Plan, noter) (*Command, error)
	}{
		{TypeEmpty, p.emptiness},
		{TypeDrift, p.drift},
		{TypeExpired, p.softExpiry},
		{TypeMulti, p.multiNode},
		{TypeSingle, p.singleNode},
	}
	for _, m := range methods {
		start := p.now()
		cmd, err := m.run(ctx, ps, cands.graceful, plan, note)
		plan.Durations[m.name] = p.now().Sub(start)
		if err != nil {
			return nil, err
		}
		if cmd != nil {
			plan.Command = cmd
			return plan, nil
		}
	}
	return plan, nil
}

// budgets fills the plan's budget maps: for each NodePool, its managed and initialized nodes,
// those of them disrupting, and what each reason's budgets allow.
func (p *Planner) budgets(c *Cluster, plan *Plan) {
	plan.Allowed = map[string]map[karpv1.DisruptionReason]int{}
	plan.BudgetValue = map[string]map[karpv1.DisruptionReason]int{}
	plan.BudgetErrors = map[string]error{}
	total, disrupting := map[string]int{}, map[string]int{}
	for _, n := range c.Nodes {
		if !n.Initialized() || meta.IsStatusConditionTrue(n.NodeClaim.Status.Conditions, karpv1.ConditionTypeInstanceTerminating) {
			continue
		}
		pool := n.NodePoolName()
		total[pool]++
		if c.disrupting(n) {
			disrupting[pool]++
		}
	}
	plan.Disrupting = disrupting
	for name, np := range c.NodePools {
		plan.Allowed[name] = map[karpv1.DisruptionReason]int{}
		plan.BudgetValue[name] = map[karpv1.DisruptionReason]int{}
		for _, reason := range budget.Reasons() {
			allowed, value, err := budget.Allowed(np, reason, total[name], disrupting[name], c.Now)
			if err != nil {
				plan.BudgetErrors[name] = err
			}
			plan.Allowed[name][reason] = allowed
			plan.BudgetValue[name][reason] = value
		}
	}
}

// consolidateAfterNever reports whether the NodePool has consolidation turned off.
func consolidateAfterNever(np *karpv1.NodePool) bool {
	d := np.Spec.Disruption.ConsolidateAfter
	return !d.IsZero() && d.IsNever()
}
