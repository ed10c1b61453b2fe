package interruption

import (
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Category is why an instance is unhealthy: the category label of
// karpenter_interruption_instance_status_unhealthy_total and the reason label of
// karpenter_nodeclaims_disrupted_total, as Karpenter spells them.
type Category string

// Categories.
const (
	// CategoryInstanceStatus: EC2's instance status check is impaired (the instance's own
	// software or configuration).
	CategoryInstanceStatus Category = "instance_status"
	// CategorySystemStatus: EC2's system status check is impaired (the host under the instance).
	CategorySystemStatus Category = "system_status"
	// CategoryEventStatus: EC2 scheduled an event for the instance (a retirement, a reboot,
	// maintenance or a stop).
	CategoryEventStatus Category = "event_status"
)

// ScheduledEventCodes are the event codes of the scheduled events the poller asks for: every
// one EC2 has.
var ScheduledEventCodes = []string{
	string(ec2types.EventCodeInstanceReboot), string(ec2types.EventCodeSystemReboot), string(ec2types.EventCodeSystemMaintenance),
	string(ec2types.EventCodeInstanceRetirement), string(ec2types.EventCodeInstanceStop),
}

// InstanceHealth is what one poll learned of one instance.
type InstanceHealth struct {
	// InstanceID is the EC2 instance.
	InstanceID string
	// InstanceImpaired and SystemImpaired say which status checks are impaired.
	InstanceImpaired, SystemImpaired bool
	// ImpairedSince is the earliest impairedSince EC2 reported on an impaired check (zero when it
	// reported none).
	ImpairedSince time.Time
	// Events are the instance's pending scheduled events (completed and canceled ones left out).
	Events []ScheduledEvent
}

// ScheduledEvent is a scheduled event of an instance.
type ScheduledEvent struct {
	// Code is one of ScheduledEventCodes.
	Code string
	// NotBefore is the earliest start of the event (zero when EC2 did not say).
	NotBefore time.Time
	// Description is EC2's description.
	Description string
}

// Action is what to do with the NodeClaim of an instance.
type Action int

// Actions.
const (
	// ActionNone: the instance is healthy.
	ActionNone Action = iota
	// ActionWait: a status check is impaired, for less than the tolerance so far.
	ActionWait
	// ActionForceful: a status check has been impaired for the tolerance or longer: terminate at
	// once (termination deadline now, then delete).
	ActionForceful
	// ActionGraceful: EC2 scheduled an event: delete the NodeClaim so that it is drained within
	// its PodDisruptionBudgets and replaced before the event.
	ActionGraceful
)

// Decision is what Decide concludes for one instance.
type Decision struct {
	// Action is what to do.
	Action Action
	// Category is why (empty with ActionNone).
	Category Category
	// ImpairedSince is when the impairment began as far as known (zero when no check is impaired):
	// the poller remembers it for the next poll.
	ImpairedSince time.Time
	// Event is the scheduled event acted on (with ActionGraceful): the one starting first.
	Event *ScheduledEvent
}

// Decide is the poller's pure decision for one instance. firstSeen is when an earlier poll first
// saw it impaired (zero if none did); the impairment began at the earlier of that and EC2's
// impairedSince (a future impairedSince, from a skewed clock, is ignored), or now. An impairment
// of tolerance or longer is acted on forcefully and wins over a scheduled event; otherwise a
// scheduled event is acted on at once, gracefully, however far off it starts, so that the
// replacement is ready before it.
func Decide(h InstanceHealth, firstSeen, now time.Time, tolerance time.Duration) Decision {
	var d Decision
	if h.InstanceImpaired || h.SystemImpaired {
		since := now
		if !firstSeen.IsZero() && firstSeen.Before(since) {
			since = firstSeen
		}
		if !h.ImpairedSince.IsZero() && h.ImpairedSince.Before(since) {
			since = h.ImpairedSince
		}
		d = Decision{Action: ActionWait, Category: CategoryInstanceStatus, ImpairedSince: since}
		if h.SystemImpaired {
			d.Category = CategorySystemStatus
		}
		if now.Sub(since) >= tolerance {
			d.Action = ActionForceful
			return d
		}
	}
	if len(h.Events) > 0 {
		first := slices.MinFunc(h.Events, func(a, b ScheduledEvent) int { return a.NotBefore.Compare(b.NotBefore) })
		d.Action, d.Category, d.Event = ActionGraceful, CategoryEventStatus, &first
	}
	return d
}

// healthOf reads one DescribeInstanceStatus item.
func healthOf(s ec2types.InstanceStatus) InstanceHealth {
	h := InstanceHealth{InstanceID: aws.ToString(s.InstanceId)}
	impaired := func(sum *ec2types.InstanceStatusSummary) bool {
		if sum == nil || sum.Status != ec2types.SummaryStatusImpaired {
			return false
		}
		for _, d := range sum.Details {
			if d.ImpairedSince != nil && (h.ImpairedSince.IsZero() || d.ImpairedSince.Before(h.ImpairedSince)) {
				h.ImpairedSince = *d.ImpairedSince
			}
		}
		return true
	}
	h.InstanceImpaired = impaired(s.InstanceStatus)
	h.SystemImpaired = impaired(s.SystemStatus)
	for _, e := range s.Events {
		desc := aws.ToString(e.Description)
		// EC2 keeps a completed or canceled event for a while, its description prefixed so.
		if !slices.Contains(ScheduledEventCodes, string(e.Code)) || strings.HasPrefix(desc, "[Completed]") || strings.HasPrefix(desc, "[Canceled]") {
			continue
		}
		ev := ScheduledEvent{Code: string(e.Code), Description: desc}
		if e.NotBefore != nil {
			ev.NotBefore = *e.NotBefore
		}
		h.Events = append(h.Events, ev)
	}
	return h
}
