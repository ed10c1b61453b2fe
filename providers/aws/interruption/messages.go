package interruption

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Kind is what a message says happens to its instances. Its values are the message_type label of
// karpenter_interruption_received_messages_total and, for the kinds that delete NodeClaims, the
// reason label of karpenter_nodeclaims_disrupted_total, as Karpenter spells them.
type Kind string

// Message kinds.
const (
	// KindSpotInterrupted: EC2 reclaims the spot instance in about two minutes.
	KindSpotInterrupted Kind = "spot_interrupted"
	// KindRebalanceRecommendation: the spot instance is at elevated risk of interruption.
	KindRebalanceRecommendation Kind = "rebalance_recommendation"
	// KindScheduledChange: AWS Health scheduled maintenance (a reboot, retirement, ...) of the
	// instance.
	KindScheduledChange Kind = "scheduled_change"
	// KindInstanceStopped: the instance is stopping or stopped.
	KindInstanceStopped Kind = "instance_stopped"
	// KindInstanceTerminated: the instance is shutting down or terminated.
	KindInstanceTerminated Kind = "instance_terminated"
	// KindCapacityReservationInterrupted: EC2 reclaims the instance from its capacity reservation.
	KindCapacityReservationInterrupted Kind = "capacity_reservation_interrupted"
	// KindNoOp: a message with nothing to act on (another event, another state, or unparseable).
	KindNoOp Kind = "no_op"
)

// Kinds are every Kind, in a stable order.
var Kinds = []Kind{KindSpotInterrupted, KindRebalanceRecommendation, KindScheduledChange, KindInstanceStopped,
	KindInstanceTerminated, KindCapacityReservationInterrupted, KindNoOp}

// DeletesNodeClaims reports whether messages of the kind delete the NodeClaims of their instances
// (a rebalance recommendation and a no-op do not).
func (k Kind) DeletesNodeClaims() bool {
	switch k {
	case KindSpotInterrupted, KindScheduledChange, KindInstanceStopped, KindInstanceTerminated, KindCapacityReservationInterrupted:
		return true
	default:
		return false
	}
}

// Event sources and detail types of the EventBridge events the queue receives.
const (
	sourceEC2    = "aws.ec2"
	sourceHealth = "aws.health"

	detailSpotInterruption           = "EC2 Spot Instance Interruption Warning"
	detailRebalanceRecommendation    = "EC2 Instance Rebalance Recommendation"
	detailStateChange                = "EC2 Instance State-change Notification"
	detailCapacityReservationWarning = "EC2 Capacity Reservation Instance Interruption Warning"
	detailHealthEvent                = "AWS Health Event"
)

// Message is one parsed event.
type Message struct {
	// Kind is what happens to the instances.
	Kind Kind
	// ID is the event's id ("" when the body is not an event).
	ID string
	// Source and DetailType identify the event ("aws.ec2", "EC2 Spot Instance Interruption Warning").
	Source, DetailType string
	// Time is when the event happened (the zero time when it does not say).
	Time time.Time
	// InstanceIDs are the EC2 instances the event is about.
	InstanceIDs []string
	// Detail says more, for Events and logs: the instance action of a spot interruption, the state
	// of a state change, the event type code of a health event.
	Detail string
}

// envelope is the EventBridge event around every message.
type envelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       string          `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

// ec2Detail is the detail of the aws.ec2 events.
type ec2Detail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
	State          string `json:"state"`
}

// healthDetail is the detail of an AWS Health event.
type healthDetail struct {
	Service           string `json:"service"`
	EventTypeCode     string `json:"eventTypeCode"`
	EventTypeCategory string `json:"eventTypeCategory"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// Parse reads an SQS message body holding an EventBridge event. An event the package does not act
// on (another source or detail type, a state such as running, a health event of another service
// or category) is a KindNoOp message without error; a body that is not an event, or an event of a
// handled type without the instance it is about, is an error (with a KindNoOp message). Either
// way the message is deleted from the queue.
func Parse(body string) (Message, error) {
	var env envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		return Message{Kind: KindNoOp}, fmt.Errorf("parse interruption message: not an EventBridge event: %w", err)
	}
	msg := Message{Kind: KindNoOp, ID: env.ID, Source: env.Source, DetailType: env.DetailType}
	if env.Time != "" {
		t, err := time.Parse(time.RFC3339, env.Time)
		if err != nil {
			return msg, fmt.Errorf("parse interruption message %s: time %q is not RFC 3339: %w", env.ID, env.Time, err)
		}
		msg.Time = t
	}
	if env.Version != "0" {
		return msg, nil
	}
	switch env.Source {
	case sourceEC2:
		return parseEC2(msg, env)
	case sourceHealth:
		if env.DetailType == detailHealthEvent {
			return parseHealth(msg, env)
		}
	}
	return msg, nil
}

func parseEC2(msg Message, env envelope) (Message, error) {
	var kind Kind
	switch env.DetailType {
	case detailSpotInterruption:
		kind = KindSpotInterrupted
	case detailRebalanceRecommendation:
		kind = KindRebalanceRecommendation
	case detailCapacityReservationWarning:
		kind = KindCapacityReservationInterrupted
	case detailStateChange:
	default:
		return msg, nil
	}
	var d ec2Detail
	if err := unmarshalDetail(env, &d); err != nil {
		return msg, err
	}
	if !isInstanceID(d.InstanceID) {
		return msg, fmt.Errorf("parse interruption message %s (%s): detail.instance-id %q is not an EC2 instance ID", env.ID, env.DetailType, d.InstanceID)
	}
	msg.Detail = d.InstanceAction
	if env.DetailType == detailStateChange {
		switch d.State {
		case "stopping", "stopped":
			kind = KindInstanceStopped
		case "shutting-down", "terminated":
			kind = KindInstanceTerminated
		default: // pending, running: nothing to do
			return msg, nil
		}
		msg.Detail = d.State
	}
	msg.Kind = kind
	msg.InstanceIDs = []string{d.InstanceID}
	return msg, nil
}

func parseHealth(msg Message, env envelope) (Message, error) {
	var d healthDetail
	if err := unmarshalDetail(env, &d); err != nil {
		return msg, err
	}
	if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" {
		return msg, nil
	}
	var ids []string
	for _, e := range d.AffectedEntities {
		if isInstanceID(e.EntityValue) && !slices.Contains(ids, e.EntityValue) {
			ids = append(ids, e.EntityValue)
		}
	}
	if len(ids) == 0 {
		return msg, fmt.Errorf("parse interruption message %s (%s %s): no EC2 instance among detail.affectedEntities", env.ID, env.DetailType, d.EventTypeCode)
	}
	msg.Kind, msg.InstanceIDs, msg.Detail = KindScheduledChange, ids, d.EventTypeCode
	return msg, nil
}

func unmarshalDetail(env envelope, into any) error {
	if len(env.Detail) == 0 {
		return fmt.Errorf("parse interruption message %s (%s): no detail", env.ID, env.DetailType)
	}
	if err := json.Unmarshal(env.Detail, into); err != nil {
		return fmt.Errorf("parse interruption message %s (%s): detail: %w", env.ID, env.DetailType, err)
	}
	return nil
}

// isInstanceID reports whether s looks like an EC2 instance ID (i-0123456789abcdef0).
func isInstanceID(s string) bool {
	rest, ok := strings.CutPrefix(s, "i-")
	return ok && rest != "" && !strings.ContainsFunc(rest, func(r rune) bool {
		return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f')
	})
}
