package planner

import (
	"context"
	"fmt"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// Validation failure reasons, the reason of Karpenter's ConsolidationRejected event.
const (
	RejectedChurn      = "churn"
	RejectedBudget     = "budget"
	RejectedScheduling = "scheduling"
)

// Validate re-checks cmd against c, read again after the validation delay, and returns the command
// to execute: for emptiness, the candidates that are still empty, consolidatable and within budget
// (a subset is fine); for consolidation, the same candidates, still valid and within budget, whose
// fresh simulation reaches the same decision with as many replacements (the fresh command, with
// fresh prices, is returned). Otherwise it returns nil and the reason (RejectedChurn,
// RejectedBudget or RejectedScheduling) with an explanation.
func (p *Planner) Validate(ctx context.Context, c *Cluster, cmd *Command) (*Command, string, string, error) {
	ps, err := newPass(c)
	if err != nil {
		return nil, "", "", err
	}
	plan := &Plan{Eligible: map[string]int{}}
	p.budgets(c, plan)
	nominated, err := ps.nominated(ctx)
	if err != nil {
		return nil, "", "", err
	}
	set, _ := p.candidates(c, ps.infos, nominated)
	all := set.graceful
	ignore := func(*Candidate, string, string) {}
	var fresh []*Candidate
	if cmd.Reason == karpv1.DisruptionReasonEmpty {
		fresh = all
	} else {
		fresh = p.consolidationCandidates(c, all, ignore)
	}
	byName := map[string]*Candidate{}
	for _, cand := range fresh {
		byName[cand.Name()] = cand
	}
	allowed := copyAllowed(plan, cmd.Reason)
	out := &Command{ID: cmd.ID, Reason: cmd.Reason, Type: cmd.Type}
	for _, old := range cmd.Candidates {
		cand := byName[old.Name()]
		if cmd.Reason == karpv1.DisruptionReasonEmpty {
			if cand == nil || !cand.Empty() || ps.buffered[cand.Name()] || !consolidatable(cand.node) || consolidateAfterNever(cand.nodePool) || allowed[cand.nodePool.Name] <= 0 {
				continue
			}
			allowed[cand.nodePool.Name]--
			out.Candidates = append(out.Candidates, cand)
			out.Savings += cand.price
			continue
		}
		if cand == nil {
			return nil, RejectedChurn, fmt.Sprintf("node %s is no longer a consolidation candidate", old.Name()), nil
		}
		if allowed[cand.nodePool.Name] <= 0 {
			return nil, RejectedBudget, fmt.Sprintf("the budgets of NodePool %s allow no more disruptions", cand.nodePool.Name), nil
		}
		allowed[cand.nodePool.Name]--
		out.Candidates = append(out.Candidates, cand)
	}
	if cmd.Reason == karpv1.DisruptionReasonEmpty {
		if len(out.Candidates) == 0 {
			return nil, RejectedChurn, "no candidate is still empty", nil
		}
		return out, "", "", nil
	}
	again, why, err := p.consolidate(ctx, ps, out.Candidates, cmd.Type, p.opts.MaxReplacementsPercent)
	if err != nil {
		return nil, "", "", err
	}
	switch {
	case again == nil:
		return nil, RejectedScheduling, why, nil
	case again.Decision() != cmd.Decision() || len(again.Replacements) != len(cmd.Replacements):
		return nil, RejectedScheduling, "scheduling simulation produced new results", nil
	}
	again.ID = cmd.ID
	return again, "", "", nil
}
