package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
)

// EC2API is the part of the EC2 client the controller calls; *ec2.Client implements it.
type EC2API interface {
	DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, opts ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error)
	DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, opts ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
	DescribeCapacityReservations(ctx context.Context, in *ec2.DescribeCapacityReservationsInput, opts ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
}

// IAMAPI is the part of the IAM client the controller calls; *iam.Client implements it.
type IAMAPI interface {
	GetInstanceProfile(ctx context.Context, in *iam.GetInstanceProfileInput, opts ...func(*iam.Options)) (*iam.GetInstanceProfileOutput, error)
	CreateInstanceProfile(ctx context.Context, in *iam.CreateInstanceProfileInput, opts ...func(*iam.Options)) (*iam.CreateInstanceProfileOutput, error)
	TagInstanceProfile(ctx context.Context, in *iam.TagInstanceProfileInput, opts ...func(*iam.Options)) (*iam.TagInstanceProfileOutput, error)
	AddRoleToInstanceProfile(ctx context.Context, in *iam.AddRoleToInstanceProfileInput, opts ...func(*iam.Options)) (*iam.AddRoleToInstanceProfileOutput, error)
	RemoveRoleFromInstanceProfile(ctx context.Context, in *iam.RemoveRoleFromInstanceProfileInput, opts ...func(*iam.Options)) (*iam.RemoveRoleFromInstanceProfileOutput, error)
	DeleteInstanceProfile(ctx context.Context, in *iam.DeleteInstanceProfileInput, opts ...func(*iam.Options)) (*iam.DeleteInstanceProfileOutput, error)
}

// SSMAPI is the part of the SSM client the controller calls; *ssm.Client implements it.
type SSMAPI interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

var (
	_ EC2API = (*ec2.Client)(nil)
	_ IAMAPI = (*iam.Client)(nil)
	_ SSMAPI = (*ssm.Client)(nil)
)

// RetryOptions configure how AWS calls are retried. The zero value means the defaults.
type RetryOptions struct {
	// MaxAttempts bounds the attempts of one call, the first included. Zero means 5.
	MaxAttempts int
	// MaxBackoff caps the jittered exponential wait between attempts. Zero means 20s.
	MaxBackoff time.Duration
}

// NewRetryer returns the SDK's standard retryer tuned by o: it retries throttling
// (RequestLimitExceeded, Throttling, ThrottlingException, ...), HTTP 5xx and connection errors
// with jittered exponential backoff, and spends from the SDK's retry-token bucket so a failing
// service is not hammered.
func NewRetryer(o RetryOptions) aws.Retryer {
	o.MaxAttempts = defaults.Positive(o.MaxAttempts, 5)
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 20 * time.Second
	}
	return retry.NewStandard(func(so *retry.StandardOptions) {
		so.MaxAttempts = o.MaxAttempts
		so.MaxBackoff = o.MaxBackoff
	})
}

// Clients are the SDK clients the controller needs.
type Clients struct {
	EC2 EC2API
	IAM IAMAPI
	SSM SSMAPI
}

// NewClients builds the EC2, IAM and SSM clients from cfg with NewRetryer(r) as their retryer.
func NewClients(cfg aws.Config, r RetryOptions) Clients {
	cfg = cfg.Copy()
	cfg.Retryer = func() aws.Retryer { return NewRetryer(r) }
	return Clients{EC2: ec2.NewFromConfig(cfg), IAM: iam.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg)}
}

// errorCode returns the AWS error code of err, or "".
func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

// isTransient tells whether err is throttling, a server fault or a network error: worth
// trying again later, and no reason to change what the class's status says.
func isTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err).Bool() {
		return true
	}
	if retry.IsErrorRetryables(retry.DefaultRetryables).IsErrorRetryable(err).Bool() {
		return true
	}
	// The SDK wraps the last attempt's error when it gives up (attempts or retry quota
	// exhausted), so the checks above see through to it.
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorFault() == smithy.FaultServer
}

// apiError says which AWS call failed, for a condition message.
type apiError struct {
	op  string
	err error
}

func (e *apiError) Error() string { return fmt.Sprintf("%s: %v", e.op, e.err) }
func (e *apiError) Unwrap() error { return e.err }

func wrapAPI(op string, err error) error {
	if err == nil {
		return nil
	}
	return &apiError{op: op, err: err}
}
