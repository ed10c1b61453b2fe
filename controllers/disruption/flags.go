package disruption

import (
	"flag"

	"github.com/joiner-dev/joiner/controllers/disruption/planner"
)

// BindFlags binds every disruption knob to a command-line flag of fs, with the defaults as flag
// defaults, so that every binary exposes them alike.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.PollingPeriod, "disruption-polling-period", DefaultPollingPeriod, "time between disruption passes that found nothing to do")
	fs.DurationVar(&o.ValidationDelay, "disruption-validation-delay", DefaultValidationDelay, "how long a consolidation decision waits before it is re-checked and carried out (negative: no wait)")
	fs.DurationVar(&o.CommandTimeout, "disruption-command-timeout", DefaultCommandTimeout, "how long a disruption waits for its replacements to initialize before it is rolled back")
	fs.DurationVar(&o.ConsolidatedRefresh, "disruption-consolidated-refresh", DefaultConsolidatedRefresh, "how long an unchanged cluster found to have nothing to consolidate is not re-examined")
	fs.IntVar(&o.Planner.MultiNodeMaxCandidates, "consolidation-max-candidates", planner.DefaultMultiNodeMaxCandidates, "most nodes multi-node consolidation considers at once")
	fs.IntVar(&o.Planner.MaxReplacementsPercent, "consolidation-max-replacements-percent", planner.DefaultMaxReplacementsPercent, "most replacements a multi-node consolidation may launch, in percent of the nodes it replaces (100: never more nodes; below 100: fewer)")
	fs.DurationVar(&o.Planner.MultiNodeTimeout, "consolidation-multi-node-timeout", planner.DefaultMultiNodeTimeout, "time limit of multi-node consolidation's simulations in one pass")
	fs.DurationVar(&o.Planner.SingleNodeTimeout, "consolidation-single-node-timeout", planner.DefaultSingleNodeTimeout, "time limit of single-node consolidation's simulations in one pass")
	fs.Float64Var(&o.Planner.MinSavingsFraction, "consolidation-min-savings-fraction", planner.DefaultMinSavingsFraction, "replacements must cost, at their worst launch price, less than (1 - this) of the nodes they replace (negative: just cheaper)")
	fs.Float64Var(&o.Planner.MinSavings, "consolidation-min-savings", 0, "absolute saving in $/h a replacement must make on top of the fraction")
	fs.DurationVar(&o.Planner.Cooldown, "consolidation-cooldown", planner.DefaultCooldown, "how long nodes launched by a disruption, and workloads it moved, are left alone (negative: never)")
	fs.IntVar(&o.Planner.Workers, "consolidation-workers", 0, "single-node consolidation simulations run at once (0: one per CPU); the decision is the same for any value")
	fs.BoolVar(&o.Planner.SpotToSpot, "spot-to-spot-consolidation", false, "allow replacing spot nodes with cheaper spot nodes (Karpenter's SpotToSpotConsolidation)")
}
