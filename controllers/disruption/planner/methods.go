package planner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// noter records why a candidate was left alone (the first reason per node wins).
type noter func(cand *Candidate, reason, msg string)

// emptiness deletes every empty, consolidatable candidate its NodePool's Empty budget allows, most
// expensive first, in one command. Balanced does not score it.
func (p *Planner) emptiness(_ context.Context, ps *pass, cands []*Candidate, plan *Plan, note noter) (*Command, error) {
	var empty []*Candidate
	for _, c := range cands {
		np := c.nodePool
		switch {
		case np.Spec.Replicas != nil:
			continue
		case consolidateAfterNever(np):
			note(c, ReasonUnconsolidatable, fmt.Sprintf("NodePool %q has consolidation disabled", np.Name))
			continue
		case !c.Empty():
			continue
		case ps.buffered[c.Name()]:
			note(c, ReasonUnconsolidatable, ps.bufferMessage(c))
			continue
		case !consolidatable(c.node):
			note(c, ReasonUnconsolidatable, fmt.Sprintf("Node is not consolidatable yet: it has seen pod activity within consolidateAfter (%s)", np.Spec.Disruption.ConsolidateAfter.String()))
			continue
		}
		empty = append(empty, c)
	}
	plan.Eligible[TypeEmpty] = len(empty)
	sortBySavingsRatio(empty)
	allowed := copyAllowed(plan, karpv1.DisruptionReasonEmpty)
	cmd := &Command{Reason: karpv1.DisruptionReasonEmpty, Type: TypeEmpty}
	for _, c := range empty {
		pool := c.nodePool.Name
		if allowed[pool] <= 0 {
			plan.ConstrainedByBudgets = true
			note(c, ReasonDisruptionBlocked, budgetMessage(plan, pool, karpv1.DisruptionReasonEmpty))
			continue
		}
		allowed[pool]--
		cmd.Candidates = append(cmd.Candidates, c)
		cmd.Savings += c.price
	}
	if len(cmd.Candidates) == 0 {
		return nil, nil
	}
	return cmd, nil
}

// consolidationCandidates applies the filters of multi- and single-node consolidation.
func (p *Planner) consolidationCandidates(c *Cluster, cands []*Candidate, note noter) []*Candidate {
	var out []*Candidate
	for _, cand := range cands {
		np := cand.nodePool
		labels := cand.node.Node.Labels
		switch {
		case np.Spec.Replicas != nil:
			continue
		case cand.instanceType == nil:
			note(cand, ReasonUnconsolidatable, fmt.Sprintf("Instance Type %q not found", labels[karpv1.LabelInstanceType]))
			continue
		case labels[karpv1.CapacityTypeLabelKey] == "":
			note(cand, ReasonUnconsolidatable, fmt.Sprintf("Node does not have label %q", karpv1.CapacityTypeLabelKey))
			continue
		case labels[karpv1.LabelTopologyZone] == "":
			note(cand, ReasonUnconsolidatable, fmt.Sprintf("Node does not have label %q", karpv1.LabelTopologyZone))
			continue
		case consolidateAfterNever(np):
			note(cand, ReasonUnconsolidatable, fmt.Sprintf("NodePool %q has consolidation disabled", np.Name))
			continue
		case cand.Empty():
			continue // left to emptiness, so that the Empty budget applies
		case np.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyWhenEmpty:
			note(cand, ReasonUnconsolidatable, fmt.Sprintf("NodePool %q has consolidation policy WhenEmpty, but node is not empty", np.Name))
			continue
		case !consolidatable(cand.node):
			note(cand, ReasonUnconsolidatable, fmt.Sprintf("Node is not consolidatable yet: it has seen pod activity within consolidateAfter (%s)", np.Spec.Disruption.ConsolidateAfter.String()))
			continue
		}
		if msg := p.cooling(c, cand); msg != "" {
			note(cand, ReasonUnconsolidatable, msg)
			continue
		}
		out = append(out, cand)
	}
	sortBySavingsRatio(out)
	return out
}

// consolidate decides what removing set would take: a delete when its pods fit elsewhere, or a
// replacement by cheaper nodes, at most maxPercent of the set's size (and one for one node). It
// returns the command, or why there is none.
func (p *Planner) consolidate(ctx context.Context, ps *pass, set []*Candidate, typ string, maxPercent int) (*Command, string, error) {
	sim, err := ps.simulate(ctx, set)
	if err != nil {
		return nil, "", err
	}
	if sim.failure != "" {
		return nil, sim.failure, nil
	}
	cmd := &Command{Reason: karpv1.DisruptionReasonUnderutilized, Type: typ, Candidates: set, Results: sim.results}
	n := len(sim.results.NewNodeClaims)
	if n == 0 {
		for _, c := range set {
			cmd.Savings += c.price
		}
		return cmd, "", nil
	}
	// Any set may be replaced by one node (Karpenter's m→1, single-node 1→1 included); m ≥ 2
	// nodes by up to maxPercent of m, as long as the whole costs less.
	if n > 1 && (len(set) == 1 || n > len(set)*maxPercent/100) {
		return nil, fmt.Sprintf("Can't remove without creating %d candidates", n), nil
	}
	plans, savings, why := p.priceReplacements(set, sim.results.NewNodeClaims, typ == TypeMulti)
	if why != "" {
		return nil, why, nil
	}
	cmd.Replacements, cmd.Savings = plans, savings
	return cmd, "", nil
}

// multiNode searches, over prefixes of the candidates sorted by savings ratio, for the largest set
// that can be deleted or replaced by cheaper nodes (binary search, as Karpenter's), within the
// Underutilized budgets, with up to MaxReplacementsPercent replacements. When that finds nothing,
// it searches again over the candidates sorted by idle cost (the price of what a node leaves
// unused), which finds nodes full in one resource and empty in the other; that search only
// replaces nodes by fewer, so that it never adds nodes to a cluster that is packed already.
func (p *Planner) multiNode(ctx context.Context, ps *pass, all []*Candidate, plan *Plan, note noter) (*Command, error) {
	cands := p.consolidationCandidates(ps.cluster, all, note)
	plan.Eligible[TypeMulti] = len(cands)
	usable := p.withinBudget(cands, plan, note)
	if len(usable) < 2 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.MultiNodeTimeout)
	defer cancel()
	totals := ps.poolTotals()
	best, err := p.largestPrefix(ctx, ps, usable, totals, plan, p.opts.MaxReplacementsPercent)
	if best != nil || err != nil || ctx.Err() != nil {
		return best, err
	}
	byIdle := slices.Clone(cands)
	sortByIdleCost(byIdle)
	return p.largestPrefix(ctx, ps, p.withinBudget(byIdle, plan, nil), totals, plan, min(p.opts.MaxReplacementsPercent, fewerNodesPercent))
}

// withinBudget walks cands in order and keeps those their NodePool's Underutilized budget still
// allows, each taking one disruption, at most MultiNodeMaxCandidates of them; note (when not nil)
// records why the others are left alone.
func (p *Planner) withinBudget(cands []*Candidate, plan *Plan, note noter) []*Candidate {
	allowed := copyAllowed(plan, karpv1.DisruptionReasonUnderutilized)
	var usable []*Candidate
	for _, c := range cands {
		pool := c.nodePool.Name
		if allowed[pool] <= 0 {
			plan.ConstrainedByBudgets = true
			if note != nil {
				note(c, ReasonDisruptionBlocked, budgetMessage(plan, pool, karpv1.DisruptionReasonUnderutilized))
			}
			continue
		}
		allowed[pool]--
		usable = append(usable, c)
	}
	if len(usable) > p.opts.MultiNodeMaxCandidates {
		usable = usable[:p.opts.MultiNodeMaxCandidates]
	}
	return usable
}

// fewerNodesPercent bounds replacements to fewer nodes than they replace (99 % of m, rounded
// down, is less than m).
const fewerNodesPercent = 99

// largestPrefix binary-searches the prefixes of usable for the largest that makes a command with
// at most maxPercent replacements.
func (p *Planner) largestPrefix(ctx context.Context, ps *pass, usable []*Candidate, totals map[string]PoolTotals, plan *Plan, maxPercent int) (*Command, error) {
	var best *Command
	lo, hi := 1, len(usable)-1
	for lo <= hi {
		mid := (lo + hi) / 2
		cmd, _, err := p.consolidate(ctx, ps, usable[:mid+1], TypeMulti, maxPercent)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
				plan.TimedOut = append(plan.TimedOut, TypeMulti)
				break
			}
			return nil, err
		}
		if cmd != nil && balancedApproves(cmd, totals) {
			best = cmd
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return best, nil
}

// singleNode tries the candidates one at a time, interleaved across NodePools, and returns the
// first that can be deleted or replaced by one cheaper node. Simulations run Workers at a time,
// a window of candidates at once, and are decided in order, so the command and the reasons noted
// are those of one candidate after the other.
func (p *Planner) singleNode(ctx context.Context, ps *pass, all []*Candidate, plan *Plan, note noter) (*Command, error) {
	cands := interleaveByNodePool(p.consolidationCandidates(ps.cluster, all, note))
	plan.Eligible[TypeSingle] = len(cands)
	deadline := p.now().Add(p.opts.SingleNodeTimeout)
	totals := ps.poolTotals()
	// skip says why a candidate is not simulated at all, "" when it is.
	skip := func(c *Candidate) (reason, msg string) {
		pool := c.nodePool.Name
		if plan.Allowed[pool][karpv1.DisruptionReasonUnderutilized] <= 0 {
			return ReasonDisruptionBlocked, budgetMessage(plan, pool, karpv1.DisruptionReasonUnderutilized)
		}
		if c.nodePool.Spec.Disruption.ConsolidationPolicy == karpv1.ConsolidationPolicyBalanced &&
			!Approved(Score(c.price, c.cost, totals[pool]), karpv1.BalancedK) {
			return ReasonUnconsolidatable, "Balanced consolidation: even deleting the node would not save enough for the disruption it causes"
		}
		return "", ""
	}
	type outcome struct {
		cmd *Command
		why string
		err error
	}
	for next := 0; next < len(cands); {
		if p.now().After(deadline) {
			plan.TimedOut = append(plan.TimedOut, TypeSingle)
			return nil, nil
		}
		// The window: from next, up to Workers candidates to simulate.
		end, window := next, map[int]*outcome{}
		for ; end < len(cands) && len(window) < p.opts.Workers; end++ {
			if reason, _ := skip(cands[end]); reason == "" {
				window[end] = &outcome{}
			}
		}
		var wg sync.WaitGroup
		for i, o := range window {
			wg.Add(1)
			go func() {
				defer wg.Done()
				o.cmd, o.why, o.err = p.consolidate(ctx, ps, []*Candidate{cands[i]}, TypeSingle, 100)
			}()
		}
		wg.Wait()
		for i := next; i < end; i++ {
			c := cands[i]
			o, simulated := window[i]
			switch {
			case !simulated:
				reason, msg := skip(c)
				if reason == ReasonDisruptionBlocked {
					plan.ConstrainedByBudgets = true
				}
				note(c, reason, msg)
			case o.err != nil:
				return nil, o.err
			case o.cmd == nil:
				note(c, ReasonUnconsolidatable, o.why)
			case !balancedApproves(o.cmd, totals):
				note(c, ReasonUnconsolidatable, "Balanced consolidation: the saving does not justify the disruption")
			default:
				return o.cmd, nil
			}
		}
		next = end
	}
	return nil, nil
}

// interleaveByNodePool keeps each NodePool's order and takes one candidate from each NodePool in
// turn (NodePools by name), so that one large NodePool cannot starve the others.
func interleaveByNodePool(cands []*Candidate) []*Candidate {
	byPool := map[string][]*Candidate{}
	var pools []string
	for _, c := range cands {
		pool := c.nodePool.Name
		if _, ok := byPool[pool]; !ok {
			pools = append(pools, pool)
		}
		byPool[pool] = append(byPool[pool], c)
	}
	sort.Strings(pools)
	out := make([]*Candidate, 0, len(cands))
	for len(out) < len(cands) {
		for _, pool := range pools {
			if q := byPool[pool]; len(q) > 0 {
				out = append(out, q[0])
				byPool[pool] = q[1:]
			}
		}
	}
	return out
}

func copyAllowed(plan *Plan, reason karpv1.DisruptionReason) map[string]int {
	out := map[string]int{}
	for pool, byReason := range plan.Allowed {
		out[pool] = byReason[reason]
	}
	return out
}

func budgetMessage(plan *Plan, pool string, reason karpv1.DisruptionReason) string {
	if err := plan.BudgetErrors[pool]; err != nil {
		return fmt.Sprintf("No allowed disruptions for disruption reason %s: the NodePool's budgets are invalid (%v)", reason, err)
	}
	return fmt.Sprintf("No allowed disruptions for disruption reason %s due to blocking budget", reason)
}
