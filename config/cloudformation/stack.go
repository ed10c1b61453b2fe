// Package cloudformation holds Joiner's CloudFormation template for EKS (joiner.yaml: the
// controller's IAM role and policy, the node role and instance profile, the interruption queue
// and the EventBridge rules that feed it, the nodes' access entry) and a minimal client that
// creates a stack of it, so tests can build the AWS side of an install in an emulator exactly as a
// user builds it in an account. docs/install-eks.md explains the template; nothing else lives here.
package cloudformation

import (
	"context"
	"crypto/sha256"
	_ "embed" // the template
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Template is joiner.yaml.
//
//go:embed joiner.yaml
var Template string

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

// Client calls the CloudFormation Query API with the credentials, region and endpoint of an
// aws.Config (BaseEndpoint, when set, replaces the regional endpoint: an emulator).
type Client struct {
	cfg  aws.Config
	http *http.Client
}

// NewClient returns a Client for cfg.
func NewClient(cfg aws.Config) *Client {
	return &Client{cfg: cfg, http: &http.Client{Timeout: time.Minute}}
}

// Create starts creating stack name from Template with the parameters, allowing the named IAM
// resources the template creates, and returns the stack's ID. WaitCreated waits for the result.
func (c *Client) Create(ctx context.Context, name string, params map[string]string) (string, error) {
	form := url.Values{"StackName": {name}, "TemplateBody": {Template}, "Capabilities.member.1": {"CAPABILITY_NAMED_IAM"}}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		n := strconv.Itoa(i + 1)
		form.Set("Parameters.member."+n+".ParameterKey", k)
		form.Set("Parameters.member."+n+".ParameterValue", params[k])
	}
	var out struct {
		StackID string `xml:"CreateStackResult>StackId"`
	}
	if err := c.call(ctx, "CreateStack", form, &out); err != nil {
		return "", fmt.Errorf("create stack %s: %w", name, err)
	}
	return out.StackID, nil
}

// Describe returns the stack's status, outputs and resources.
func (c *Client) Describe(ctx context.Context, name string) (Stack, error) {
	var out struct {
		Stacks []struct {
			ID      string `xml:"StackId"`
			Status  string `xml:"StackStatus"`
			Reason  string `xml:"StackStatusReason"`
			Outputs []struct {
				Key   string `xml:"OutputKey"`
				Value string `xml:"OutputValue"`
			} `xml:"Outputs>member"`
		} `xml:"DescribeStacksResult>Stacks>member"`
	}
	if err := c.call(ctx, "DescribeStacks", url.Values{"StackName": {name}}, &out); err != nil {
		return Stack{}, fmt.Errorf("describe stack %s: %w", name, err)
	}
	if len(out.Stacks) != 1 {
		return Stack{}, fmt.Errorf("describe stack %s: %d stacks in the answer, want 1", name, len(out.Stacks))
	}
	s := out.Stacks[0]
	st := Stack{ID: s.ID, Status: s.Status, Reason: s.Reason, Outputs: map[string]string{}}
	for _, o := range s.Outputs {
		st.Outputs[o.Key] = o.Value
	}
	var err error
	st.Resources, err = c.resources(ctx, name)
	return st, err
}

func (c *Client) resources(ctx context.Context, name string) ([]Resource, error) {
	var all []Resource
	next := ""
	for {
		form := url.Values{"StackName": {name}}
		if next != "" {
			form.Set("NextToken", next)
		}
		var out struct {
			Resources []struct {
				LogicalID  string `xml:"LogicalResourceId"`
				PhysicalID string `xml:"PhysicalResourceId"`
				Type       string `xml:"ResourceType"`
				Status     string `xml:"ResourceStatus"`
				Reason     string `xml:"ResourceStatusReason"`
			} `xml:"ListStackResourcesResult>StackResourceSummaries>member"`
			Next string `xml:"ListStackResourcesResult>NextToken"`
		}
		if err := c.call(ctx, "ListStackResources", form, &out); err != nil {
			return nil, fmt.Errorf("list the resources of stack %s: %w", name, err)
		}
		for _, r := range out.Resources {
			all = append(all, Resource(r))
		}
		if next = out.Next; next == "" {
			return all, nil
		}
	}
}

// WaitCreated polls the stack every interval until its creation ends, and returns it when it is
// CREATE_COMPLETE; any other end (a rollback) is an error naming the resources that failed. ctx
// bounds the wait.
func (c *Client) WaitCreated(ctx context.Context, name string, interval time.Duration) (Stack, error) {
	for {
		st, err := c.Describe(ctx, name)
		if err != nil {
			return st, err
		}
		switch {
		case st.Status == "CREATE_COMPLETE":
			return st, nil
		case !strings.HasSuffix(st.Status, "_IN_PROGRESS"):
			var failed []string
			for _, r := range st.Resources {
				if strings.HasSuffix(r.Status, "_FAILED") {
					failed = append(failed, fmt.Sprintf("%s (%s): %s", r.LogicalID, r.Type, r.Reason))
				}
			}
			return st, fmt.Errorf("stack %s ended %s (%s); failed resources: %s", name, st.Status, st.Reason, strings.Join(failed, "; "))
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("wait for stack %s (still %s): %w", name, st.Status, ctx.Err())
		case <-time.After(interval):
		}
	}
}

// call sends one signed Query API request and decodes its XML answer into out.
func (c *Client) call(ctx context.Context, action string, form url.Values, out any) error {
	form.Set("Action", action)
	form.Set("Version", "2010-05-15")
	body := form.Encode()
	endpoint := "https://cloudformation." + c.cfg.Region + ".amazonaws.com/"
	if c.cfg.BaseEndpoint != nil {
		endpoint = strings.TrimSuffix(*c.cfg.BaseEndpoint, "/") + "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	if c.cfg.Credentials == nil {
		return fmt.Errorf("no AWS credentials in the configuration")
	}
	creds, err := c.cfg.Credentials.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("retrieve AWS credentials: %w", err)
	}
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), "cloudformation", c.cfg.Region, time.Now()); err != nil {
		return fmt.Errorf("sign the request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		var e struct {
			Code    string `xml:"Error>Code"`
			Message string `xml:"Error>Message"`
		}
		if xml.Unmarshal(data, &e) == nil && e.Code != "" {
			return fmt.Errorf("%s: %s (HTTP %d)", e.Code, e.Message, resp.StatusCode)
		}
		return fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, data)
	}
	if err := xml.Unmarshal(data, out); err != nil {
		return fmt.Errorf("decode the %s answer: %w", action, err)
	}
	return nil
}
