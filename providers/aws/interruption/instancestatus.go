package interruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// InstanceStatusControllerName names the instance-status poller in logs and Events.
const InstanceStatusControllerName = "interruption.instancestatus"

// Defaults of InstanceStatusOptions, as Karpenter polls.
const (
	// DefaultInstanceStatusInterval is how often instance health is read.
	DefaultInstanceStatusInterval = time.Minute
	// DefaultImpairedTolerance is how long a status check may stay impaired before the instance
	// is terminated forcefully.
	DefaultImpairedTolerance = 120 * time.Second
	// DefaultInstanceStatusPageSize is the MaxResults of each DescribeInstanceStatus (EC2's
	// maximum; EC2 accepts 5 to 1000).
	DefaultInstanceStatusPageSize = 1000
	// DefaultInstanceStatusRetryMin and DefaultInstanceStatusRetryMax bound the wait after a
	// failed poll (doubling in between); a poll that succeeds waits the interval again.
	DefaultInstanceStatusRetryMin = 10 * time.Second
	DefaultInstanceStatusRetryMax = 5 * time.Minute
)

// minInstanceStatusPageSize is EC2's minimum MaxResults.
const minInstanceStatusPageSize = 5

// InstanceStatusOptions configure the InstanceStatusPoller. EC2 and InstanceID are required; zero
// values of the rest mean the documented defaults.
type InstanceStatusOptions struct {
	// EC2 is the EC2 client (*ec2.Client).
	EC2 ec2.DescribeInstanceStatusAPIClient
	// InstanceID returns the EC2 instance ID of a provider ID (aws.ParseProviderID).
	InstanceID func(providerID string) (string, error)
	// Clock times polls, impairments and retries; nil means the real clock.
	Clock clock.Clock
	// Recorder receives the Events; nil means the manager's, taken in SetupWithManager.
	Recorder events.EventRecorder
	// Log receives the poller's messages; the zero value discards them.
	Log logr.Logger
	// Interval is the time between polls (DefaultInstanceStatusInterval).
	Interval time.Duration
	// ImpairedTolerance is how long a check may be impaired before forceful termination
	// (DefaultImpairedTolerance).
	ImpairedTolerance time.Duration
	// PageSize is the MaxResults of each call (DefaultInstanceStatusPageSize); EC2 takes 5 to 1000.
	PageSize int32
	// RetryMin and RetryMax bound the wait after a failed poll (DefaultInstanceStatusRetryMin,
	// DefaultInstanceStatusRetryMax).
	RetryMin, RetryMax time.Duration
}

func (o InstanceStatusOptions) withDefaults() InstanceStatusOptions {
	orDefault(&o.Interval, DefaultInstanceStatusInterval)
	orDefault(&o.ImpairedTolerance, DefaultImpairedTolerance)
	orDefault(&o.RetryMin, DefaultInstanceStatusRetryMin)
	orDefault(&o.RetryMax, DefaultInstanceStatusRetryMax)
	if o.PageSize <= 0 {
		o.PageSize = DefaultInstanceStatusPageSize
	}
	o.Clock, o.Log = clockAndLog(o.Clock, o.Log)
	return o
}

// InstanceStatusPoller reads EC2's status checks and scheduled events of the cluster's instances
// every interval, as Karpenter does alongside its interruption queue (it needs no queue): an
// instance whose instance or system status check stays impaired for the tolerance is terminated
// forcefully, and an instance with a scheduled retirement, reboot, maintenance or stop is
// drained and replaced ahead of the event. It runs on the leader only.
//
// What it remembers across polls is when it first saw each instance impaired. A restart loses
// that; the next poll takes it again from EC2's impairedSince when EC2 reports one, and otherwise
// starts the tolerance anew from that poll (so a restart can delay a forceful termination by up
// to one tolerance).
type InstanceStatusPoller struct {
	kube    client.Client
	opts    InstanceStatusOptions
	metrics *InstanceStatusMetrics
	deleter *deleter

	// impairedSince is when each impaired instance of the cluster became impaired as far as
	// known; only the polling goroutine touches it.
	impairedSince map[string]time.Time
}

var (
	_ cloudprovider.InstrumentedController = (*InstanceStatusPoller)(nil)
	_ manager.LeaderElectionRunnable       = (*InstanceStatusPoller)(nil)
)

// NewInstanceStatusPoller returns a poller that reads NodeClaims and Nodes through kube (a
// manager's cached client, with the InstanceIDField and fieldindex indexes) and deletes NodeClaims
// through it.
func NewInstanceStatusPoller(kube client.Client, opts InstanceStatusOptions) (*InstanceStatusPoller, error) {
	switch {
	case kube == nil:
		return nil, errors.New("new instance status poller: a Kubernetes client is required")
	case opts.EC2 == nil:
		return nil, errors.New("new instance status poller: an EC2 client is required")
	case opts.InstanceID == nil:
		return nil, errors.New("new instance status poller: a provider ID parser is required")
	case opts.PageSize != 0 && (opts.PageSize < minInstanceStatusPageSize || opts.PageSize > DefaultInstanceStatusPageSize):
		return nil, fmt.Errorf("new instance status poller: PageSize %d is out of EC2's range %d to %d",
			opts.PageSize, minInstanceStatusPageSize, DefaultInstanceStatusPageSize)
	}
	opts = opts.withDefaults()
	return &InstanceStatusPoller{kube: kube, opts: opts, metrics: newInstanceStatusMetrics(),
		deleter: newDeleter(kube, opts.Clock), impairedSince: map[string]time.Time{}}, nil
}

// RegisterMetrics registers the poller's metrics with reg (nil registers none). The operator
// calls it before SetupWithManager.
func (p *InstanceStatusPoller) RegisterMetrics(reg prometheus.Registerer) error {
	return registerMetrics(&p.metrics, reg)
}

// SetupWithManager indexes NodeClaims by instance ID and adds the poller to mgr.
func (p *InstanceStatusPoller) SetupWithManager(mgr manager.Manager) error {
	return setUp(mgr, p, InstanceStatusControllerName, &p.opts.Recorder, p.opts.InstanceID)
}

// NeedLeaderElection is true: one replica acts on each instance.
func (p *InstanceStatusPoller) NeedLeaderElection() bool { return true }

// Start polls at once and then every interval until ctx ends; after a failed poll it waits
// RetryMin, doubling up to RetryMax, instead.
func (p *InstanceStatusPoller) Start(ctx context.Context) error {
	p.opts.Log.Info("polling EC2 instance status", "interval", p.opts.Interval.String(), "impairedTolerance", p.opts.ImpairedTolerance.String())
	pollLoop(ctx, p.opts.Clock, p.opts.Log, "instance status poll failed", p.opts.Interval, p.opts.RetryMin, p.opts.RetryMax, p.Poll)
	return nil
}

// Poll reads the status of the instances EC2 reports impaired or with scheduled events, and
// acts on those the cluster's NodeClaims hold. It returns an error when EC2 could not be read
// (counted in joiner_interruption_instance_status_errors_total) or a NodeClaim could not be
// read or deleted (that instance is looked at again on the next poll).
func (p *InstanceStatusPoller) Poll(ctx context.Context) error {
	healths, err := p.describe(ctx)
	if err != nil {
		p.metrics.Errors.WithLabelValues(errorCode(err)).Inc()
		return err
	}
	now := p.opts.Clock.Now()
	tracked := map[string]time.Time{}
	var errs []error
	for _, h := range healths {
		claims, err := claimsOf(ctx, p.kube, h.InstanceID)
		if err != nil {
			if since, ok := p.impairedSince[h.InstanceID]; ok {
				tracked[h.InstanceID] = since
			}
			errs = append(errs, err)
			continue
		}
		if len(claims) == 0 {
			// Another cluster's instance, or one whose NodeClaim is gone.
			continue
		}
		d := Decide(h, p.impairedSince[h.InstanceID], now, p.opts.ImpairedTolerance)
		if !d.ImpairedSince.IsZero() {
			tracked[h.InstanceID] = d.ImpairedSince
		}
		p.countUnhealthy(h)
		if d.Action != ActionForceful && d.Action != ActionGraceful {
			continue
		}
		for i := range claims {
			if err := p.act(ctx, h, d, &claims[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Instances no longer impaired (or no longer the cluster's) start afresh next time.
	p.impairedSince = tracked
	return errors.Join(errs...)
}

// filterSets are the three DescribeInstanceStatus queries of a poll.
var filterSets = [][]ec2types.Filter{
	{{Name: aws.String("instance-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("system-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("event.code"), Values: ScheduledEventCodes}},
}

// describe runs the three queries, each paginated, and returns the health of every instance
// they name (once each, by instance ID). It reads each item's status itself rather than trusting
// the filter that returned it.
func (p *InstanceStatusPoller) describe(ctx context.Context) ([]InstanceHealth, error) {
	byID := map[string]InstanceHealth{}
	for _, filters := range filterSets {
		pages := ec2.NewDescribeInstanceStatusPaginator(p.opts.EC2, &ec2.DescribeInstanceStatusInput{
			Filters: filters, IncludeAllInstances: aws.Bool(false), MaxResults: aws.Int32(p.opts.PageSize),
		})
		for pages.HasMorePages() {
			out, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describe instance status (%s): %w", aws.ToString(filters[0].Name), err)
			}
			for _, s := range out.InstanceStatuses {
				if h := healthOf(s); h.InstanceID != "" {
					byID[h.InstanceID] = h
				}
			}
		}
	}
	out := make([]InstanceHealth, 0, len(byID))
	for _, h := range byID {
		out = append(out, h)
	}
	slices.SortFunc(out, func(a, b InstanceHealth) int { return strings.Compare(a.InstanceID, b.InstanceID) })
	return out, nil
}

// countUnhealthy counts what a poll found wrong with one of the cluster's instances.
func (p *InstanceStatusPoller) countUnhealthy(h InstanceHealth) {
	for _, c := range []struct {
		is       bool
		category Category
	}{{h.InstanceImpaired, CategoryInstanceStatus}, {h.SystemImpaired, CategorySystemStatus}, {len(h.Events) > 0, CategoryEventStatus}} {
		if c.is {
			p.metrics.Unhealthy.WithLabelValues(string(c.category)).Inc()
		}
	}
}

// act deletes the NodeClaim of an unhealthy instance as d says, counts it and records a Warning
// Event on the NodeClaim and its Node.
func (p *InstanceStatusPoller) act(ctx context.Context, h InstanceHealth, d Decision, nc *karpv1.NodeClaim) error {
	log := p.opts.Log.WithValues("instance", h.InstanceID, "nodeclaim", nc.Name, "category", string(d.Category))
	deleted, err := p.deleter.delete(ctx, nc, d.Action == ActionForceful)
	if err != nil {
		return fmt.Errorf("instance %s: %w", h.InstanceID, err)
	}
	if !deleted {
		log.V(1).Info("nodeclaim of an unhealthy instance is already being deleted")
		return nil
	}
	countDisrupted(p.metrics.Disrupted, string(d.Category), nc)
	nodes := nodesOf(ctx, p.kube, nc, func(err error) {
		log.Error(err, "find the node of an unhealthy instance; recording Events on the NodeClaim only")
	})
	note := unhealthyNote(d, p.opts.Clock.Now(), p.opts.ImpairedTolerance)
	record(p.opts.Recorder, nc, nodes, corev1.EventTypeWarning, "InstanceUnhealthy", "Delete", note)
	log.Info("deleting the nodeclaim of an unhealthy instance", "node", nc.Status.NodeName, "forceful", d.Action == ActionForceful, "note", note)
	return nil
}

// unhealthyNote is the text of the InstanceUnhealthy Event.
func unhealthyNote(d Decision, now time.Time, tolerance time.Duration) string {
	const prefix = "An unhealthy warning was triggered for the instance: "
	if d.Action == ActionGraceful {
		notBefore := "with no start given"
		if !d.Event.NotBefore.IsZero() {
			notBefore = "not before " + d.Event.NotBefore.UTC().Format(time.RFC3339)
		}
		return fmt.Sprintf("%sEC2 scheduled %s %s (%s); deleting the NodeClaim to drain and replace it ahead of the event",
			prefix, d.Event.Code, notBefore, d.Event.Description)
	}
	check := "instance"
	if d.Category == CategorySystemStatus {
		check = "system"
	}
	return fmt.Sprintf("%sEC2 has reported its %s status check impaired since %s (%s, tolerated %s); terminating the NodeClaim forcefully",
		prefix, check, d.ImpairedSince.UTC().Format(time.RFC3339), now.Sub(d.ImpairedSince).Round(time.Second), tolerance)
}

// errorCode is the AWS error code of err ("" when it has none), the error label of the errors
// metric.
func errorCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}
