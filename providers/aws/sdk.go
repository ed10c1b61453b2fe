package aws

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"

	"github.com/joiner-dev/joiner/providers/aws/nodeclass"
)

// ConfigOptions select how LoadConfig builds the AWS SDK configuration. The zero value uses the
// SDK's standard chains throughout.
type ConfigOptions struct {
	// Region overrides the SDK's region chain (AWS_REGION, the shared config); when both are
	// empty the region of the instance, from its metadata service, is used.
	Region string
	// EndpointURL sends every AWS call to this URL instead of AWS (tests against an emulator);
	// empty keeps the SDK's chain (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_EC2, ...).
	EndpointURL string
	// Retry tunes retries of throttling, server errors and network errors.
	Retry nodeclass.RetryOptions
}

// LoadConfig returns the AWS SDK configuration of the controller: credentials from the SDK's
// default chain (environment, IRSA web identity, EKS Pod Identity, shared files, instance
// metadata), the region as ConfigOptions says, and the standard retryer (jittered exponential
// backoff on throttling and 5xx, bounded by a retry-token bucket).
func LoadConfig(ctx context.Context, o ConfigOptions) (aws.Config, error) {
	opts := []func(*config.LoadOptions) error{
		config.WithRetryer(func() aws.Retryer { return nodeclass.NewRetryer(o.Retry) }),
	}
	if o.Region != "" {
		opts = append(opts, config.WithRegion(o.Region))
	}
	if o.EndpointURL != "" {
		opts = append(opts, config.WithBaseEndpoint(o.EndpointURL))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" && o.EndpointURL == "" {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := imds.NewFromConfig(cfg).GetRegion(rctx, &imds.GetRegionInput{})
		if err != nil {
			return aws.Config{}, fmt.Errorf("no AWS region configured (set AWS_REGION) and the instance metadata service did not tell: %w", err)
		}
		cfg.Region = out.Region
	}
	if cfg.Region == "" {
		return aws.Config{}, fmt.Errorf("no AWS region configured: set AWS_REGION")
	}
	return cfg, nil
}
