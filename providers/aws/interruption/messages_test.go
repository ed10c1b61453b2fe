package interruption

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// event returns an EventBridge event as EC2 and AWS Health send them to the queue.
func event(source, detailType, detail string) string {
	return fmt.Sprintf(`{"version":"0","id":"7e3f0a52-93c1-4cc7-a1f4-5d0b6c2a9e10","detail-type":%q,"source":%q,`+
		`"account":"123456789012","time":"2026-07-01T12:00:00Z","region":"us-east-1",`+
		`"resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-0abc123def4567890"],"detail":%s}`, detailType, source, detail)
}

const instanceID = "i-0abc123def4567890"

func TestParse(t *testing.T) {
	at := time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		body    string
		want    Kind
		ids     []string
		detail  string
		wantErr string
	}{
		{name: "spot interruption warning",
			body: event("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0abc123def4567890","instance-action":"terminate"}`),
			want: KindSpotInterrupted, ids: []string{instanceID}, detail: "terminate"},
		{name: "spot interruption that stops",
			body: event("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0abc123def4567890","instance-action":"stop"}`),
			want: KindSpotInterrupted, ids: []string{instanceID}, detail: "stop"},
		{name: "rebalance recommendation",
			body: event("aws.ec2", "EC2 Instance Rebalance Recommendation", `{"instance-id":"i-0abc123def4567890"}`),
			want: KindRebalanceRecommendation, ids: []string{instanceID}},
		{name: "state change to stopping",
			body: event("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc123def4567890","state":"stopping"}`),
			want: KindInstanceStopped, ids: []string{instanceID}, detail: "stopping"},
		{name: "state change to stopped",
			body: event("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc123def4567890","state":"stopped"}`),
			want: KindInstanceStopped, ids: []string{instanceID}, detail: "stopped"},
		{name: "state change to shutting-down",
			body: event("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc123def4567890","state":"shutting-down"}`),
			want: KindInstanceTerminated, ids: []string{instanceID}, detail: "shutting-down"},
		{name: "state change to terminated",
			body: event("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc123def4567890","state":"terminated"}`),
			want: KindInstanceTerminated, ids: []string{instanceID}, detail: "terminated"},
		{name: "state change to running is nothing to act on",
			body: event("aws.ec2", "EC2 Instance State-change Notification", `{"instance-id":"i-0abc123def4567890","state":"running"}`),
			want: KindNoOp},
		{name: "capacity reservation interruption",
			body: event("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning", `{"instance-id":"i-0abc123def4567890","capacity-reservation-id":"cr-0123"}`),
			want: KindCapacityReservationInterrupted, ids: []string{instanceID}},
		{name: "scheduled change with two instances",
			body: event("aws.health", "AWS Health Event", `{"eventArn":"arn:aws:health:us-east-1::event/EC2/AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED/x",`+
				`"service":"EC2","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","eventTypeCategory":"scheduledChange",`+
				`"startTime":"Wed, 01 Jul 2026 14:00:00 GMT","affectedEntities":[{"entityValue":"i-0abc123def4567890"},{"entityValue":"i-0fed"},{"entityValue":"i-0fed"}]}`),
			want: KindScheduledChange, ids: []string{instanceID, "i-0fed"}, detail: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"},
		{name: "health event of another service",
			body: event("aws.health", "AWS Health Event", `{"service":"RDS","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"db-1"}]}`),
			want: KindNoOp},
		{name: "health issue rather than scheduled change",
			body: event("aws.health", "AWS Health Event", `{"service":"EC2","eventTypeCategory":"issue","affectedEntities":[{"entityValue":"i-0abc123def4567890"}]}`),
			want: KindNoOp},
		{name: "scheduled change without instances",
			body: event("aws.health", "AWS Health Event", `{"service":"EC2","eventTypeCode":"AWS_EC2_SYSTEM_MAINTENANCE_EVENT","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"vol-1"}]}`),
			want: KindNoOp, wantErr: "no EC2 instance among detail.affectedEntities"},
		{name: "another EC2 event",
			body: event("aws.ec2", "EC2 AMI State Change", `{"ImageId":"ami-1"}`),
			want: KindNoOp},
		{name: "another source",
			body: event("aws.s3", "Object Created", `{}`),
			want: KindNoOp},
		{name: "another envelope version",
			body: strings.Replace(event("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0abc123def4567890"}`), `"version":"0"`, `"version":"1"`, 1),
			want: KindNoOp},
		{name: "spot interruption without an instance",
			body: event("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-action":"terminate"}`),
			want: KindNoOp, wantErr: `detail.instance-id "" is not an EC2 instance ID`},
		{name: "instance id that is not one",
			body: event("aws.ec2", "EC2 Instance Rebalance Recommendation", `{"instance-id":"arn:aws:ec2:x"}`),
			want: KindNoOp, wantErr: "is not an EC2 instance ID"},
		{name: "detail that is not an object",
			body: event("aws.ec2", "EC2 Spot Instance Interruption Warning", `"terminate"`),
			want: KindNoOp, wantErr: "detail: json"},
		{name: "no detail",
			body: `{"version":"0","id":"x","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning"}`,
			want: KindNoOp, wantErr: "no detail"},
		{name: "not JSON",
			body: "hello", want: KindNoOp, wantErr: "not an EventBridge event"},
		{name: "S3 test event of a queue subscription",
			body: `{"Service":"Amazon S3","Event":"s3:TestEvent","Time":"2026-07-01T12:00:00.000Z","Bucket":"b"}`,
			want: KindNoOp},
		{name: "bad time",
			body: strings.Replace(event("aws.ec2", "EC2 Spot Instance Interruption Warning", `{"instance-id":"i-0abc123def4567890"}`), "2026-07-01T12:00:00Z", "yesterday", 1),
			want: KindNoOp, wantErr: "is not RFC 3339"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := Parse(tt.body)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("Parse error = %v, want one containing %q", err, tt.wantErr)
			}
			if msg.Kind != tt.want || !slices.Equal(msg.InstanceIDs, tt.ids) || msg.Detail != tt.detail {
				t.Errorf("Parse = %+v, want kind %s, instances %v, detail %q", msg, tt.want, tt.ids, tt.detail)
			}
			if err == nil && strings.Contains(tt.body, `"version":"0"`) && !msg.Time.Equal(at) {
				t.Errorf("time %v, want %v", msg.Time, at)
			}
		})
	}
}

func TestKindDeletesNodeClaims(t *testing.T) {
	for _, k := range Kinds {
		want := k != KindRebalanceRecommendation && k != KindNoOp
		if got := k.DeletesNodeClaims(); got != want {
			t.Errorf("%s.DeletesNodeClaims() = %v, want %v", k, got, want)
		}
	}
}

func TestParseQueue(t *testing.T) {
	tests := []struct {
		in                     string
		url, name, owner, fail string
	}{
		{in: "prod-interruption", name: "prod-interruption"},
		{in: " prod-interruption ", name: "prod-interruption"},
		{in: "https://sqs.us-east-1.amazonaws.com/123456789012/prod", url: "https://sqs.us-east-1.amazonaws.com/123456789012/prod"},
		{in: "arn:aws:sqs:us-east-1:123456789012:prod", name: "prod", owner: "123456789012"},
		{in: "arn:aws:sns:us-east-1:123456789012:prod", fail: "is not an SQS queue ARN"},
		{in: "arn:aws:sqs:us-east-1:123456789012", fail: "is not an SQS queue ARN"},
		{in: "queues/prod", fail: "is not a queue name"},
	}
	for _, tt := range tests {
		url, name, owner, err := parseQueue(tt.in)
		if tt.fail != "" {
			if err == nil || !strings.Contains(err.Error(), tt.fail) {
				t.Errorf("parseQueue(%q) error = %v, want %q", tt.in, err, tt.fail)
			}
			continue
		}
		if err != nil || url != tt.url || name != tt.name || owner != tt.owner {
			t.Errorf("parseQueue(%q) = %q, %q, %q, %v; want %q, %q, %q", tt.in, url, name, owner, err, tt.url, tt.name, tt.owner)
		}
	}
}
