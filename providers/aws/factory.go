package aws

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/aws/interruption"
	"github.com/joiner-dev/joiner/providers/aws/nodeclass"
)

// Defaults of FactoryOptions.
const (
	// DefaultInstanceTypeRefreshInterval is how often instance types and their zones are read again.
	DefaultInstanceTypeRefreshInterval = time.Hour
	// DefaultSpotPriceRefreshInterval is how often spot prices are read again.
	DefaultSpotPriceRefreshInterval = time.Hour
	// DefaultLaunchTemplateGCInterval is how often unused launch templates are looked for.
	DefaultLaunchTemplateGCInterval = 5 * time.Minute
	// refreshRetryMin and refreshRetryMax bound the wait after a failed refresh.
	refreshRetryMin, refreshRetryMax = 10 * time.Second, 5 * time.Minute
)

// FactoryOptions configure Factory. Zero fields take the documented defaults; Options.ClusterName
// is required.
type FactoryOptions struct {
	// Options configure the provider. EC2 and EKS default to clients of the SDK configuration,
	// Region to its region.
	Options
	// Config is the AWS SDK configuration; nil means LoadConfig(ConfigOptions).
	Config *aws.Config
	// ConfigOptions are used by LoadConfig when Config is nil.
	ConfigOptions ConfigOptions
	// NodeClass configures the EC2NodeClass controller; ClusterName and Region are filled in,
	// and Cleanup deletes the class's launch templates (before any Cleanup set here).
	NodeClass nodeclass.Options
	// InterruptionQueue is the name of the SQS queue of interruption events (Karpenter's
	// settings.interruptionQueue); its URL or ARN also do. When set, the leader runs the
	// interruption controller (package interruption) on it; empty turns interruption handling off.
	InterruptionQueue string
	// SQS is the client of the interruption queue; nil means one built from the SDK configuration.
	SQS interruption.SQSAPI
	// InstanceStatus configures the instance-status poller (package interruption), which the
	// leader always runs; EC2, InstanceID, Clock and Log are filled in when unset.
	InstanceStatus interruption.InstanceStatusOptions
	// InstanceTypeRefreshInterval, SpotPriceRefreshInterval and LaunchTemplateGCInterval time
	// the provider's background work (DefaultInstanceTypeRefreshInterval, ...).
	InstanceTypeRefreshInterval, SpotPriceRefreshInterval, LaunchTemplateGCInterval time.Duration
}

// Factory returns the operator's cloudprovider.Factory for AWS: a Provider on the operator's
// client, with the controllers it owns: the EC2NodeClass controller (package nodeclass), the
// refresher that reads instance types and spot prices at start and then periodically (on every
// replica), the launch-template garbage collector (on the leader), the tagger that gives the
// instances of registered NodeClaims their Name and karpenter.sh/nodeclaim tags (on the leader),
// the instance-status poller (package interruption, on the leader) and, with an interruption queue, the interruption controller (package interruption, on the
// leader).
func Factory(opts FactoryOptions) cloudprovider.Factory {
	return func(ctx context.Context, kube client.Client) (cloudprovider.CloudProvider, []cloudprovider.Controller, error) {
		if opts.ClusterName == "" {
			return nil, nil, errors.New("aws provider: the cluster name is required (--cluster-name)")
		}
		var cfg aws.Config
		if opts.Config != nil {
			cfg = opts.Config.Copy()
		} else {
			loaded, err := LoadConfig(ctx, opts.ConfigOptions)
			if err != nil {
				return nil, nil, fmt.Errorf("aws provider: %w", err)
			}
			cfg = loaded
		}
		if cfg.Retryer == nil {
			cfg.Retryer = func() aws.Retryer { return nodeclass.NewRetryer(opts.ConfigOptions.Retry) }
		}
		po := opts.Options
		if po.Region == "" {
			po.Region = cfg.Region
		}
		if po.EC2 == nil {
			po.EC2 = ec2.NewFromConfig(cfg)
		}
		if po.EKS == nil {
			po.EKS = eks.NewFromConfig(cfg)
		}
		if po.Clock == nil {
			po.Clock = clock.RealClock{}
		}
		p, err := New(kube, po)
		if err != nil {
			return nil, nil, err
		}
		clients := nodeclass.NewClients(cfg, opts.ConfigOptions.Retry)
		nco := opts.NodeClass
		nco.ClusterName, nco.Region = po.ClusterName, po.Region
		userCleanup := nco.Cleanup
		nco.Cleanup = func(ctx context.Context, nc *awsv1.EC2NodeClass) error {
			if err := p.DeleteLaunchTemplates(ctx, nc.Name); err != nil {
				return err
			}
			if userCleanup != nil {
				return userCleanup(ctx, nc)
			}
			return nil
		}
		ncc, err := nodeclass.NewController(kube, clients.EC2, clients.IAM, clients.SSM, po.Clock, nil, nco)
		if err != nil {
			return nil, nil, fmt.Errorf("aws provider: %w", err)
		}
		log := po.Log
		if log.GetSink() == nil {
			log = logr.Discard()
		}
		controllers := []cloudprovider.Controller{
			ncc,
			&refresher{p: p, log: log, clock: po.Clock,
				types:    orDefault(opts.InstanceTypeRefreshInterval, DefaultInstanceTypeRefreshInterval),
				spot:     orDefault(opts.SpotPriceRefreshInterval, DefaultSpotPriceRefreshInterval),
				retryMin: refreshRetryMin, retryMax: refreshRetryMax},
			&templateCollector{p: p, log: log, clock: po.Clock, every: orDefault(opts.LaunchTemplateGCInterval, DefaultLaunchTemplateGCInterval)},
			newTagger(kube, p, po.Clock, log.WithName("tagging")),
		}
		interruptions, err := interruptionControllers(kube, opts, cfg, po, p, log)
		if err != nil {
			return nil, nil, fmt.Errorf("aws provider: %w", err)
		}
		return p, append(controllers, interruptions...), nil
	}
}

// interruptionControllers returns the instance-status poller and, with an interruption queue, the
// interruption controller (package interruption; both on the leader).
func interruptionControllers(kube client.Client, opts FactoryOptions, cfg aws.Config, po Options, p *Provider, log logr.Logger) ([]cloudprovider.Controller, error) {
	isp, err := newInstanceStatusPoller(kube, opts.InstanceStatus, cfg, po, log)
	if err != nil {
		return nil, err
	}
	if opts.InterruptionQueue == "" {
		return []cloudprovider.Controller{isp}, nil
	}
	queue := opts.SQS
	if queue == nil {
		queue = sqs.NewFromConfig(cfg)
	}
	ic, err := interruption.NewController(kube, interruption.Options{
		Queue: opts.InterruptionQueue, SQS: queue, Offerings: p.UnavailableOfferings(), InstanceID: ParseProviderID,
		Clock: po.Clock, Log: log.WithName("interruption"),
	})
	if err != nil {
		return nil, err
	}
	return []cloudprovider.Controller{isp, ic}, nil
}

// newInstanceStatusPoller returns the instance-status poller with the provider's EC2 client
// (when it can describe instance status), clock and log unless opts name others.
func newInstanceStatusPoller(kube client.Client, opts interruption.InstanceStatusOptions, cfg aws.Config, po Options, log logr.Logger) (*interruption.InstanceStatusPoller, error) {
	if opts.EC2 == nil {
		if c, ok := po.EC2.(ec2.DescribeInstanceStatusAPIClient); ok {
			opts.EC2 = c
		} else {
			opts.EC2 = ec2.NewFromConfig(cfg)
		}
	}
	if opts.InstanceID == nil {
		opts.InstanceID = ParseProviderID
	}
	if opts.Clock == nil {
		opts.Clock = po.Clock
	}
	if opts.Log.GetSink() == nil {
		opts.Log = log.WithName("instancestatus")
	}
	return interruption.NewInstanceStatusPoller(kube, opts)
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// refresher reads instance types and spot prices at start and then periodically, retrying a
// failed read with backoff. Every replica runs it: the webhooks and the scheduler of each need
// instance types.
type refresher struct {
	p           *Provider
	log         logr.Logger
	clock       clock.Clock
	types, spot time.Duration
	// retryMin and retryMax bound the wait after a failed refresh.
	retryMin, retryMax time.Duration
}

var (
	_ cloudprovider.Controller       = (*refresher)(nil)
	_ manager.LeaderElectionRunnable = (*refresher)(nil)
)

// SetupWithManager adds the refresher to mgr.
func (r *refresher) SetupWithManager(mgr manager.Manager) error { return mgr.Add(r) }

// NeedLeaderElection is false: every replica keeps its instance types current.
func (r *refresher) NeedLeaderElection() bool { return false }

// Start refreshes until ctx ends.
func (r *refresher) Start(ctx context.Context) error {
	run := func(name string, every time.Duration, refresh func(context.Context) error) {
		wait := time.Duration(0)
		backoff := r.retryMin
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.clock.After(wait):
			}
			if err := refresh(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				r.log.Error(err, "refresh failed; retrying", "what", name, "in", backoff)
				wait, backoff = backoff, min(2*backoff, r.retryMax)
				continue
			}
			wait, backoff = every, r.retryMin
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		run("spot prices", r.spot, r.p.RefreshSpotPrices)
	}()
	run("instance types", r.types, func(ctx context.Context) error {
		err := r.p.RefreshInstanceTypes(ctx)
		if err == nil {
			infos, _, _ := r.p.source.snapshot()
			r.log.V(1).Info("instance types refreshed", "types", len(infos))
		}
		return err
	})
	<-done
	return nil
}

// templateCollector deletes unused launch templates periodically, on the leader.
type templateCollector struct {
	p     *Provider
	log   logr.Logger
	clock clock.Clock
	every time.Duration
}

var (
	_ cloudprovider.Controller       = (*templateCollector)(nil)
	_ manager.LeaderElectionRunnable = (*templateCollector)(nil)
)

// SetupWithManager adds the collector to mgr.
func (c *templateCollector) SetupWithManager(mgr manager.Manager) error { return mgr.Add(c) }

// NeedLeaderElection is true: only the leader launches, so only it knows which templates are used.
func (c *templateCollector) NeedLeaderElection() bool { return true }

// Start collects every interval until ctx ends.
func (c *templateCollector) Start(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-c.clock.After(c.every):
		}
		deleted, err := c.p.CollectLaunchTemplates(ctx)
		if err != nil && ctx.Err() == nil {
			c.log.Error(err, "collect unused launch templates")
		}
		if len(deleted) > 0 {
			c.log.Info("deleted unused launch templates", "names", deleted)
		}
	}
}
