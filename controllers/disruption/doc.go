// Package disruption is the disruption controller: a leader-only loop that, every polling period,
// asks package planner what voluntary disruption should do next (delete empty nodes, delete or
// replace underutilized ones within the NodePools' budgets), waits the validation delay and checks
// the decision again, then carries it out through its orchestration queue: taint the candidates
// karpenter.sh/disrupted:NoSchedule and mark them (DisruptionReason condition, annotations),
// launch the replacements, wait until they are Initialized, and delete the candidates' NodeClaims
// so that the termination controller drains them (PodDisruptionBudgets hold) and terminates their
// instances.
//
// The queue's state lives on the NodeClaims (planner.CommandAnnotationKey and friends), so a
// restart resumes every command or rolls it back: never a replacement left without its command,
// never a candidate left tainted, never a node deleted except through termination's drain. A
// command whose replacement is lost (insufficient capacity, registration timeout) or that times
// out is rolled back: candidates untainted, replacements that have not initialized deleted.
//
// It must not delete a Node itself, must not start a command its NodePools' budgets do not allow,
// and must not act on a decision it has not validated after the delay.
package disruption
