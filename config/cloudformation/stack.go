// Package cloudformation holds Joiner's CloudFormation template for EKS (joiner.yaml: the
// controller's IAM role and policy, the node role and instance profile, the interruption queue
// and the EventBridge rules that feed it, the nodes' access entry) and a small client over the
// AWS SDK's that creates a stack of it, so tests can build the AWS side of an install in an
// emulator exactly as a user builds it in an account. docs/install-eks.md explains the template;
// the controller never imports this package.
package cloudformation

import (
	"context"
	_ "embed" // the template
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	cfn "github.com/aws/aws-sdk-go-v2/service/cloudformation"
	cfntypes "github.com/aws/aws-sdk-go-v2/service/cloudformation/types"
)

// Template is joiner.yaml.
//
//go:embed joiner.yaml
var Template string

// maxCreateWait bounds WaitCreated when ctx has no deadline.
const maxCreateWait = time.Hour

// Stack is what DescribeStacks and ListStackResources say about a stack.
type Stack struct {
	// ID is the stack's ARN.
	ID string
	// Status is the stack status (CREATE_COMPLETE, ROLLBACK_COMPLETE, ...) and Reason why.
	Status, Reason string
	// Outputs are the stack's outputs by key.
	Outputs map[string]string
	// Resources are the stack's resources, in the order CloudFormation lists them.
	Resources []Resource
}

// Resource is one resource of a stack.
type Resource struct {
	LogicalID, PhysicalID, Type, Status, Reason string
}

// Client creates and reads stacks of Template through the SDK's CloudFormation client.
type Client struct {
	api *cfn.Client
}

// NewClient returns a Client with the credentials, region and endpoint of cfg (BaseEndpoint,
// when set, replaces the regional endpoint: an emulator).
func NewClient(cfg aws.Config) *Client {
	return &Client{api: cfn.NewFromConfig(cfg)}
}

// Create starts creating stack name from Template with the parameters, allowing the named IAM
// resources the template creates, and returns the stack's ID. WaitCreated waits for the result.
func (c *Client) Create(ctx context.Context, name string, params map[string]string) (string, error) {
	in := &cfn.CreateStackInput{
		StackName:    aws.String(name),
		TemplateBody: aws.String(Template),
		Capabilities: []cfntypes.Capability{cfntypes.CapabilityCapabilityNamedIam},
	}
	for k, v := range params {
		in.Parameters = append(in.Parameters, cfntypes.Parameter{ParameterKey: aws.String(k), ParameterValue: aws.String(v)})
	}
	out, err := c.api.CreateStack(ctx, in)
	if err != nil {
		return "", fmt.Errorf("create stack %s: %w", name, err)
	}
	return aws.ToString(out.StackId), nil
}

// Describe returns the stack's status, outputs and resources.
func (c *Client) Describe(ctx context.Context, name string) (Stack, error) {
	out, err := c.api.DescribeStacks(ctx, &cfn.DescribeStacksInput{StackName: aws.String(name)})
	if err != nil {
		return Stack{}, fmt.Errorf("describe stack %s: %w", name, err)
	}
	if len(out.Stacks) != 1 {
		return Stack{}, fmt.Errorf("describe stack %s: %d stacks in the answer, want 1", name, len(out.Stacks))
	}
	s := out.Stacks[0]
	st := Stack{ID: aws.ToString(s.StackId), Status: string(s.StackStatus), Reason: aws.ToString(s.StackStatusReason), Outputs: map[string]string{}}
	for _, o := range s.Outputs {
		st.Outputs[aws.ToString(o.OutputKey)] = aws.ToString(o.OutputValue)
	}
	pages := cfn.NewListStackResourcesPaginator(c.api, &cfn.ListStackResourcesInput{StackName: aws.String(name)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return st, fmt.Errorf("list the resources of stack %s: %w", name, err)
		}
		for _, r := range page.StackResourceSummaries {
			st.Resources = append(st.Resources, Resource{
				LogicalID: aws.ToString(r.LogicalResourceId), PhysicalID: aws.ToString(r.PhysicalResourceId),
				Type: aws.ToString(r.ResourceType), Status: string(r.ResourceStatus), Reason: aws.ToString(r.ResourceStatusReason),
			})
		}
	}
	return st, nil
}

// WaitCreated polls the stack every interval (the SDK's StackCreateComplete waiter) until its
// creation ends, and returns it when it is CREATE_COMPLETE; any other end (a rollback) is an error
// naming the resources that failed. ctx bounds the wait (an hour when it has no deadline).
func (c *Client) WaitCreated(ctx context.Context, name string, interval time.Duration) (Stack, error) {
	if interval <= 0 {
		return Stack{}, fmt.Errorf("wait for stack %s: the poll interval is %v, want more than zero", name, interval)
	}
	maxWait := maxCreateWait
	if deadline, ok := ctx.Deadline(); ok {
		maxWait = time.Until(deadline)
	}
	waiter := cfn.NewStackCreateCompleteWaiter(c.api, func(o *cfn.StackCreateCompleteWaiterOptions) {
		o.MinDelay, o.MaxDelay = interval, interval
	})
	waitErr := waiter.Wait(ctx, &cfn.DescribeStacksInput{StackName: aws.String(name)}, maxWait)
	// Describe the stack even when ctx ran out, to say where the creation stands.
	describeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	st, err := c.Describe(describeCtx, name)
	switch {
	case err != nil:
		return st, fmt.Errorf("wait for stack %s: %w", name, errors.Join(waitErr, err))
	case waitErr == nil && st.Status == string(cfntypes.StackStatusCreateComplete):
		return st, nil
	case waitErr != nil && (st.Status == string(cfntypes.StackStatusCreateComplete) || strings.HasSuffix(st.Status, "_IN_PROGRESS")):
		return st, fmt.Errorf("wait for stack %s (%s): %w", name, st.Status, waitErr)
	}
	var failed []string
	for _, r := range st.Resources {
		if strings.HasSuffix(r.Status, "_FAILED") {
			failed = append(failed, fmt.Sprintf("%s (%s): %s", r.LogicalID, r.Type, r.Reason))
		}
	}
	return st, fmt.Errorf("stack %s ended %s (%s), not CREATE_COMPLETE; failed resources: %s", name, st.Status, st.Reason, strings.Join(failed, "; "))
}
