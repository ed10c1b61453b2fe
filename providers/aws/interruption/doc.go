// Package interruption is the AWS provider's interruption handling: with an SQS queue that
// EventBridge feeds (Karpenter's settings.interruptionQueue), the leader long-polls it for the
// events EC2 and AWS Health send about instances — spot interruption warnings, rebalance
// recommendations, scheduled changes, capacity-reservation interruptions and state changes to
// stopping, stopped, shutting-down or terminated — and acts before the instance goes: it deletes
// the instance's NodeClaim (termination then taints the Node karpenter.sh/disrupted:NoSchedule,
// drains it within its PodDisruptionBudgets and terminates the instance, and the provisioner
// launches capacity for the evicted pods), marks an interrupted spot offering unavailable so that
// the replacement goes elsewhere, records Events and the karpenter_interruption_* metrics, and
// deletes every message it handled or could not parse.
//
// A rebalance recommendation only produces an Event, as in Karpenter by default. A message about
// an instance that no NodeClaim holds (another cluster's, or one already gone) is deleted
// unacted on: one queue serves one cluster.
//
// It must not launch or terminate instances itself, nor write node classes: it acts only through
// NodeClaim deletion and the provider's unavailable-offerings cache.
package interruption
