package cloudformation_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

// rule is an EventBridge rule with its targets' ARNs.
type rule struct {
	Name, State, EventPattern string
	Targets                   []string
}

// listRules returns the rules of the default bus whose names start with prefix, with their
// targets.
func listRules(ctx context.Context, eb *eventbridge.Client, prefix string) ([]rule, error) {
	var rules []rule
	in := &eventbridge.ListRulesInput{NamePrefix: aws.String(prefix)}
	for {
		out, err := eb.ListRules(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list the rules named %s*: %w", prefix, err)
		}
		for _, r := range out.Rules {
			rules = append(rules, rule{Name: aws.ToString(r.Name), State: string(r.State), EventPattern: aws.ToString(r.EventPattern)})
		}
		if in.NextToken = out.NextToken; in.NextToken == nil {
			break
		}
	}
	for i, r := range rules {
		in := &eventbridge.ListTargetsByRuleInput{Rule: aws.String(r.Name)}
		for {
			out, err := eb.ListTargetsByRule(ctx, in)
			if err != nil {
				return nil, fmt.Errorf("list the targets of rule %s: %w", r.Name, err)
			}
			for _, t := range out.Targets {
				rules[i].Targets = append(rules[i].Targets, aws.ToString(t.Arn))
			}
			if in.NextToken = out.NextToken; in.NextToken == nil {
				break
			}
		}
	}
	return rules, nil
}

// putEvent sends one event to the default bus, as EC2 or AWS Health would.
func putEvent(ctx context.Context, eb *eventbridge.Client, source, detailType string, detail map[string]any) error {
	d, err := json.Marshal(detail)
	if err != nil {
		return err
	}
	out, err := eb.PutEvents(ctx, &eventbridge.PutEventsInput{Entries: []ebtypes.PutEventsRequestEntry{
		{Source: aws.String(source), DetailType: aws.String(detailType), Detail: aws.String(string(d))},
	}})
	if err != nil {
		return fmt.Errorf("put a %s %q event: %w", source, detailType, err)
	}
	for _, e := range out.Entries {
		if e.ErrorCode != nil {
			return fmt.Errorf("EventBridge refused the %s %q event: %s: %s", source, detailType, aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage))
		}
	}
	if out.FailedEntryCount != 0 {
		return fmt.Errorf("EventBridge refused %d %s %q events", out.FailedEntryCount, source, detailType)
	}
	return nil
}
