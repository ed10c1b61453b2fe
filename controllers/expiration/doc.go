// Package expiration ends NodeClaims whose spec.expireAfter has passed. It deletes NodeClaims and
// writes their Expired condition; draining and terminating a deleted NodeClaim is package
// termination's job (bounded by the NodeClaim's terminationGracePeriod), and replacing an Expired
// one within the disruption budgets is package disruption's. It must not disrupt a NodeClaim that
// is already being deleted.
//
// The expiry deadline of a NodeClaim is its creationTimestamp + spec.expireAfter; expireAfter
// "Never" means none. What happens at the deadline depends on the NodeClaim's NodePool
// (karpenter.sh/nodepool label) and its joiner.dev/expiration annotation:
//
//   - Forceful (the default, and Karpenter v1.14's behaviour): at the deadline the NodeClaim is
//     deleted, with no regard for disruption budgets or karpenter.sh/do-not-disrupt. It is counted
//     in karpenter_nodeclaims_disrupted_total{reason="expired"} and gets a Normal event Expired.
//
//   - Graceful: at the soft deadline the NodeClaim gets the status condition Expired=True (reason
//     Expired) and is left running, so that disruption replaces it through its queue, within the
//     budgets and with the replacement launched first. At the hard deadline, deadline + grace
//     (annotation joiner.dev/expiration-grace, a Go duration, default 24h), a NodeClaim still
//     there is deleted forcefully as above. An unparsable or non-positive grace, or an unknown
//     joiner.dev/expiration value, falls back to the default and is reported by a Warning event
//     InvalidExpirationAnnotation on the NodePool.
//
// Soft deadline jitter. A fleet created together (a rollout, a scale-up) expires together; marking
// it Expired at one instant would hand disruption a burst of candidates when a budget window
// opens. So the soft deadline is deadline + jitter, where
//
//	jitter = f(uid) × min(expireAfter / 10, 1h)
//
// and f(uid) ∈ [0, 1) is the 64-bit FNV-1a hash of the NodeClaim's UID divided by 2^64. The jitter
// is deterministic (the same NodeClaim gets the same soft deadline on every reconcile, restart and
// replica), is spread uniformly across NodeClaims, and never exceeds a tenth of the lifetime or an
// hour. The hard deadline carries no jitter. A grace shorter than the jitter lets some NodeClaims
// reach the hard deadline first; they are deleted without being marked.
//
// The controller requeues each NodeClaim for the next of these instants on its injected clock.
// Status is written with a merge patch under an optimistic lock, and a deletion is made with UID
// and resourceVersion preconditions, so that a stale cache never deletes (or counts) twice.
package expiration
