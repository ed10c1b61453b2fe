package planner

import (
	"math"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// PoolTotals are what a NodePool's nodes cost in all, per hour and in disruption, the
// denominators of the Balanced score.
type PoolTotals struct {
	Cost, Disruption float64
}

// Score is the Balanced policy's score of a move in a NodePool: the fraction of the pool's cost it
// saves divided by the fraction of the pool's disruption cost it spends. A move that saves nothing
// scores 0; one that disrupts nothing scores +Inf; totals that are not positive score 0.
func Score(savings, disruption float64, totals PoolTotals) float64 {
	if totals.Cost <= 0 || totals.Disruption <= 0 || savings <= 0 {
		return 0
	}
	savingsFraction := savings / totals.Cost
	disruptionFraction := disruption / totals.Disruption
	if disruptionFraction == 0 {
		return math.Inf(1)
	}
	return savingsFraction / disruptionFraction
}

// Approved reports whether a score passes the Balanced threshold 1/k.
func Approved(score float64, k int) bool {
	return score >= 1/float64(k)
}

// poolTotals sums price and disruption cost over every managed node of each NodePool.
func (ps *pass) poolTotals() map[string]PoolTotals {
	out := map[string]PoolTotals{}
	for _, info := range ps.infos {
		pool := info.node.NodePoolName()
		t := out[pool]
		t.Cost += info.price
		t.Disruption += info.cost
		out[pool] = t
	}
	return out
}

// balancedApproves scores cmd in each of its Balanced NodePools, splitting the saving in
// proportion to each pool's share of the candidates' price; every Balanced pool must approve.
// Pools with another policy always approve.
func balancedApproves(cmd *Command, totals map[string]PoolTotals) bool {
	price := map[string]float64{}
	disruption := map[string]float64{}
	policy := map[string]karpv1.ConsolidationPolicy{}
	total := 0.0
	for _, c := range cmd.Candidates {
		pool := c.nodePool.Name
		price[pool] += c.price
		disruption[pool] += c.cost
		policy[pool] = c.nodePool.Spec.Disruption.ConsolidationPolicy
		total += c.price
	}
	for pool, pol := range policy {
		if pol != karpv1.ConsolidationPolicyBalanced {
			continue
		}
		savings := cmd.Savings
		if total > 0 {
			savings = cmd.Savings * price[pool] / total
		}
		if !Approved(Score(savings, disruption[pool], totals[pool]), karpv1.BalancedK) {
			return false
		}
	}
	return true
}
