// Package planner decides what voluntary disruption does next: which empty nodes to delete, which
// sets of underutilized nodes to delete or replace with fewer, cheaper nodes, and, for every node
// it leaves alone, why. It follows Karpenter v1.14's consolidation (candidate filters in the same
// order and with the same messages, eviction costs, savings-ratio ordering, the Balanced policy,
// budgets per reason, the multi-node binary search and the single-node scan), and goes beyond it
// where users asked: a set of m nodes may be replaced by n < m nodes when the total price drops,
// and a churn guard requires a real saving against the replacements' worst launch price and
// leaves recently moved nodes and pods alone for a cooling period.
//
// Map of the files, in the order a pass uses them:
//   - cluster.go: the Cluster a pass reads (built from state.ClusterState, or by hand in
//     tests and benchmarks) and each managed node's price and disruption cost; the pods a
//     simulation would move are restricted to their namespace's NodePools (state.Tenancy).
//   - candidates.go: the candidate filters, shared by every method, and the per-node verdicts.
//   - cost.go: eviction and disruption costs.
//   - simulate.go: the scheduling simulation of removing a set of nodes (package scheduling,
//     prepared once per pass and solved many times), and the price check of its replacements.
//   - balanced.go: the Balanced policy's score.
//   - methods.go: emptiness, multi-node and single-node consolidation.
//   - plan.go: Planner.Plan, one pass: the methods in order, the first command found, and the
//     verdicts; Command and its text.
//   - apply.go: applying a command to a Cluster in memory, for the dry-run view and benchmarks.
//
// It is pure: it never talks to the API server, a clock or a cloud provider; time comes in as
// Cluster.Now and instance types in Cluster.Input.
package planner
