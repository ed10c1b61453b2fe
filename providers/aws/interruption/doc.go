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
// The instance-status poller (instancestatus.go) needs no queue: every minute the leader asks
// ec2:DescribeInstanceStatus for the instances whose instance or system status check is impaired
// and those with a scheduled event (retirement, reboot, maintenance, stop). A check impaired for
// 120 s or longer gets the instance's NodeClaim deleted forcefully (the
// karpenter.sh/nodeclaim-termination-timestamp deadline set to now first); a scheduled event gets
// it deleted gracefully at once, so that it is drained and replaced before the event. Both go
// through the same deletion, Events and karpenter_nodeclaims_disrupted_total as the queue's
// messages (reasons instance_status, system_status, event_status).
//
// It must not launch or terminate instances itself, nor write node classes: it acts only through
// NodeClaim deletion and the provider's unavailable-offerings cache.
package interruption
