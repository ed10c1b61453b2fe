package planner

import (
	"context"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// drift replaces drifted nodes, oldest drift first (nodes without pods to move before the
// others), one per pass, within the Drifted budgets. As in Karpenter v1.14 there is no price check
// and any number of replacements is fine; a node whose pods cannot all be placed is reported and
// skipped.
func (p *Planner) drift(ctx context.Context, ps *pass, _ []*Candidate, plan *Plan, note noter) (*Command, error) {
	return p.replaceOldest(ctx, ps, plan, note, karpv1.ConditionTypeDrifted, karpv1.DisruptionReasonDrifted, TypeDrift)
}

// softExpiry replaces nodes that soft expiry marked Expired, like drift, within the Drifted
// budgets.
func (p *Planner) softExpiry(ctx context.Context, ps *pass, _ []*Candidate, plan *Plan, note noter) (*Command, error) {
	return p.replaceOldest(ctx, ps, plan, note, ConditionTypeExpired, DisruptionReasonExpired, TypeExpired)
}

func (p *Planner) replaceOldest(ctx context.Context, ps *pass, plan *Plan, note noter, condition string, reason karpv1.DisruptionReason, typ string) (*Command, error) {
	type marked struct {
		cand  *Candidate
		since time.Time
	}
	var cands []marked
	for _, c := range ps.eventual {
		if c.nodePool.Spec.Replicas != nil {
			continue
		}
		cond := meta.FindStatusCondition(c.node.NodeClaim.Status.Conditions, condition)
		if cond == nil || cond.Status != "True" {
			continue
		}
		cands = append(cands, marked{cand: c, since: cond.LastTransitionTime.Time})
	}
	plan.Eligible[typ] = len(cands)
	sort.SliceStable(cands, func(i, j int) bool {
		ei, ej := len(cands[i].cand.reschedulable) == 0, len(cands[j].cand.reschedulable) == 0
		if ei != ej {
			return ei
		}
		if !cands[i].since.Equal(cands[j].since) {
			return cands[i].since.Before(cands[j].since)
		}
		return cands[i].cand.Name() < cands[j].cand.Name()
	})
	for _, m := range cands {
		c := m.cand
		pool := c.nodePool.Name
		if plan.Allowed[pool][karpv1.DisruptionReasonDrifted] <= 0 {
			plan.ConstrainedByBudgets = true
			note(c, ReasonDisruptionBlocked, budgetMessage(plan, pool, karpv1.DisruptionReasonDrifted))
			continue
		}
		sim, err := ps.simulate(ctx, []*Candidate{c})
		if err != nil {
			return nil, err
		}
		if sim.failure != "" {
			note(c, ReasonDisruptionBlocked, sim.failure)
			continue
		}
		cmd := &Command{Reason: reason, Type: typ, Candidates: []*Candidate{c}, Results: sim.results, Replacements: sim.results.NewNodeClaims}
		cmd.Savings = c.price
		for _, r := range cmd.Replacements {
			cmd.Savings -= r.Price
		}
		return cmd, nil
	}
	return nil, nil
}
