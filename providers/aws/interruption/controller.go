package interruption

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
)

// ControllerName names the controller in logs and Events.
const ControllerName = "interruption"

// InstanceIDField is the cache field index of NodeClaims by the EC2 instance ID of their
// status.providerID, which SetupWithManager registers.
const InstanceIDField = "aws.status.instanceID"

// Defaults of Options, as Karpenter polls its queue.
const (
	// DefaultWaitTime is how long one ReceiveMessage waits for a message (SQS's maximum).
	DefaultWaitTime = 20 * time.Second
	// DefaultVisibilityTimeout is how long a received message stays hidden from other receives:
	// a message whose handling failed comes back after it.
	DefaultVisibilityTimeout = 20 * time.Second
	// DefaultMaxMessages is how many messages one ReceiveMessage takes (SQS's maximum); they are
	// handled in parallel.
	DefaultMaxMessages = 10
	// DefaultRetryMin and DefaultRetryMax bound the wait after a failed GetQueueUrl or
	// ReceiveMessage (doubling in between).
	DefaultRetryMin = time.Second
	DefaultRetryMax = time.Minute
)

// SQSAPI is the part of the SQS client the controller uses.
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// OfferingMarker records offerings that ran out of capacity; the AWS provider's
// *aws.UnavailableOfferings is one.
type OfferingMarker interface {
	// MarkUnavailable keeps launches off the offering for a while.
	MarkUnavailable(instanceType, zone, capacityType string)
}

// Options configure the controller. Queue, SQS, Offerings and InstanceID are required; zero values
// of the rest mean the documented defaults.
type Options struct {
	// Queue is the SQS queue: its name (as Karpenter's settings.interruptionQueue), its URL, or its
	// ARN.
	Queue string
	// SQS is the SQS client.
	SQS SQSAPI
	// Offerings is where an interrupted spot offering is marked unavailable.
	Offerings OfferingMarker
	// InstanceID returns the EC2 instance ID of a provider ID (aws.ParseProviderID).
	InstanceID func(providerID string) (string, error)
	// Clock times the queue duration and the retries; nil means the real clock.
	Clock clock.Clock
	// Recorder receives the Events; nil means the manager's, taken in SetupWithManager.
	Recorder events.EventRecorder
	// Log receives the controller's messages; the zero value discards them.
	Log logr.Logger
	// WaitTime, VisibilityTimeout and MaxMessages shape each ReceiveMessage (DefaultWaitTime,
	// DefaultVisibilityTimeout, DefaultMaxMessages). SQS takes whole seconds.
	WaitTime, VisibilityTimeout time.Duration
	MaxMessages                 int32
	// RetryMin and RetryMax bound the wait after a failed SQS call (DefaultRetryMin,
	// DefaultRetryMax).
	RetryMin, RetryMax time.Duration
}

func (o Options) withDefaults() Options {
	orDefault(&o.WaitTime, DefaultWaitTime)
	orDefault(&o.VisibilityTimeout, DefaultVisibilityTimeout)
	orDefault(&o.RetryMin, DefaultRetryMin)
	orDefault(&o.RetryMax, DefaultRetryMax)
	if o.MaxMessages <= 0 || o.MaxMessages > DefaultMaxMessages {
		o.MaxMessages = DefaultMaxMessages
	}
	o.Clock, o.Log = clockAndLog(o.Clock, o.Log)
	return o
}

// Controller polls the interruption queue and acts on its messages. It runs on the leader only.
type Controller struct {
	kube    client.Client
	opts    Options
	metrics *Metrics

	// queueURL is resolved on the first poll; only the polling goroutine touches it.
	queueURL string

	// deleter deletes each NodeClaim once, however many messages name its instance.
	deleter *deleter
}

var (
	_ cloudprovider.InstrumentedController = (*Controller)(nil)
	_ manager.LeaderElectionRunnable       = (*Controller)(nil)
)

// NewController returns an interruption controller that reads NodeClaims and Nodes through kube
// (a manager's cached client, with the InstanceIDField and fieldindex indexes) and deletes
// NodeClaims through it.
func NewController(kube client.Client, opts Options) (*Controller, error) {
	switch {
	case kube == nil:
		return nil, errors.New("new interruption controller: a Kubernetes client is required")
	case strings.TrimSpace(opts.Queue) == "":
		return nil, errors.New("new interruption controller: the queue name is required (--interruption-queue)")
	case opts.SQS == nil:
		return nil, errors.New("new interruption controller: an SQS client is required")
	case opts.Offerings == nil:
		return nil, errors.New("new interruption controller: the unavailable-offerings cache is required")
	case opts.InstanceID == nil:
		return nil, errors.New("new interruption controller: a provider ID parser is required")
	}
	if _, _, _, err := parseQueue(opts.Queue); err != nil {
		return nil, fmt.Errorf("new interruption controller: %w", err)
	}
	opts = opts.withDefaults()
	return &Controller{kube: kube, opts: opts, metrics: newMetrics(), deleter: newDeleter(kube, opts.Clock)}, nil
}

// RegisterMetrics registers the controller's metrics with reg (nil registers none). The operator
// calls it before SetupWithManager.
func (c *Controller) RegisterMetrics(reg prometheus.Registerer) error {
	return registerMetrics(&c.metrics, reg)
}

// SetupWithManager indexes NodeClaims by instance ID and adds the controller to mgr.
func (c *Controller) SetupWithManager(mgr manager.Manager) error {
	return setUp(mgr, c, ControllerName, &c.opts.Recorder, c.opts.InstanceID)
}

// IndexInstanceIDs returns the index function of InstanceIDField: the instance ID that
// instanceID reads from a NodeClaim's status.providerID, or nothing. Tests building a fake client
// register it with WithIndex.
func IndexInstanceIDs(instanceID func(providerID string) (string, error)) client.IndexerFunc {
	return fieldindex.IndexerFunc(instanceIDOf(instanceID))
}

// NeedLeaderElection is true: one replica acts on each message.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start polls the queue until ctx ends, retrying failed SQS calls with backoff.
func (c *Controller) Start(ctx context.Context) error {
	log := c.opts.Log.WithValues("queue", c.opts.Queue)
	log.Info("handling interruption events")
	pollLoop(ctx, c.opts.Clock, log, "interruption queue unavailable", 0, c.opts.RetryMin, c.opts.RetryMax, c.Poll)
	return nil
}

// Poll receives one batch of messages (waiting up to WaitTime for the first) and handles them in
// parallel. It returns an error only when the queue cannot be read; a message whose handling
// failed is logged and left in the queue, to come back after the visibility timeout.
func (c *Controller) Poll(ctx context.Context) error {
	if c.queueURL == "" {
		url, err := c.resolveQueue(ctx)
		if err != nil {
			return err
		}
		c.queueURL = url
	}
	out, err := c.opts.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(c.queueURL),
		MaxNumberOfMessages:         c.opts.MaxMessages,
		WaitTimeSeconds:             seconds(c.opts.WaitTime),
		VisibilityTimeout:           seconds(c.opts.VisibilityTimeout),
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		return fmt.Errorf("receive messages from %s: %w", c.queueURL, err)
	}
	var wg sync.WaitGroup
	for _, m := range out.Messages {
		wg.Go(func() { c.handle(ctx, m) })
	}
	wg.Wait()
	return nil
}

// resolveQueue returns the URL of the configured queue.
func (c *Controller) resolveQueue(ctx context.Context) (string, error) {
	url, name, owner, err := parseQueue(c.opts.Queue)
	if err != nil || url != "" {
		return url, err
	}
	in := &sqs.GetQueueUrlInput{QueueName: aws.String(name)}
	if owner != "" {
		in.QueueOwnerAWSAccountId = aws.String(owner)
	}
	out, err := c.opts.SQS.GetQueueUrl(ctx, in)
	var missing *sqstypes.QueueDoesNotExist
	if errors.As(err, &missing) {
		return "", fmt.Errorf("SQS queue %q does not exist: create it (with the EventBridge rules that feed it) or fix --interruption-queue: %w", name, err)
	}
	if err != nil {
		return "", fmt.Errorf("get the URL of SQS queue %q: %w", name, err)
	}
	return aws.ToString(out.QueueUrl), nil
}

// parseQueue reads a queue setting: a URL is used as it is, an ARN
// (arn:aws:sqs:<region>:<account>:<name>) gives the name and owner, anything else is a name.
func parseQueue(q string) (url, name, owner string, err error) {
	q = strings.TrimSpace(q)
	switch {
	case strings.HasPrefix(q, "https://") || strings.HasPrefix(q, "http://"):
		return q, "", "", nil
	case strings.HasPrefix(q, "arn:"):
		parts := strings.Split(q, ":")
		if len(parts) != 6 || parts[2] != "sqs" || parts[5] == "" {
			return "", "", "", fmt.Errorf("interruption queue %q is not an SQS queue ARN (arn:aws:sqs:<region>:<account>:<name>); give the queue's name", q)
		}
		return "", parts[5], parts[4], nil
	case strings.ContainsAny(q, "/: "):
		return "", "", "", fmt.Errorf("interruption queue %q is not a queue name; give the name of the SQS queue (such as my-cluster-interruption)", q)
	default:
		return "", q, "", nil
	}
}

func seconds(d time.Duration) int32 { return int32(d.Round(time.Second) / time.Second) }

// handle parses and acts on one message, then deletes it, unless acting failed.
func (c *Controller) handle(ctx context.Context, m sqstypes.Message) {
	msg, parseErr := Parse(aws.ToString(m.Body))
	c.metrics.Received.WithLabelValues(string(msg.Kind)).Inc()
	if sent, ok := enqueuedAt(m, msg); ok {
		c.metrics.QueueDuration.Observe(max(c.opts.Clock.Since(sent), 0).Seconds())
	}
	log := c.opts.Log.WithValues("messageID", aws.ToString(m.MessageId), "kind", string(msg.Kind))
	if msg.ID != "" {
		log = log.WithValues("event", msg.ID, "source", msg.Source, "detailType", msg.DetailType)
	}
	switch {
	case parseErr != nil:
		log.Error(parseErr, "deleting an interruption message that cannot be parsed")
	case msg.Kind == KindNoOp:
		log.V(1).Info("deleting an interruption message with nothing to act on")
	default:
		if err := c.act(ctx, log, msg); err != nil {
			log.Error(err, "could not act on an interruption message; it stays in the queue and comes back after the visibility timeout",
				"instances", msg.InstanceIDs)
			return
		}
	}
	if _, err := c.opts.SQS.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(c.queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		log.Error(err, "delete interruption message; it will be received again")
		return
	}
	c.metrics.Deleted.Inc()
}

// enqueuedAt is when the message entered the queue: its SentTimestamp, else the event's time.
func enqueuedAt(m sqstypes.Message, msg Message) (time.Time, bool) {
	if ms, err := strconv.ParseInt(m.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); err == nil && ms > 0 {
		return time.UnixMilli(ms), true
	}
	return msg.Time, !msg.Time.IsZero()
}

// act applies the message to the NodeClaim of each of its instances.
func (c *Controller) act(ctx context.Context, log logr.Logger, msg Message) error {
	var errs []error
	for _, id := range msg.InstanceIDs {
		claims, err := claimsOf(ctx, c.kube, id)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if len(claims) == 0 {
			log.V(1).Info("no NodeClaim holds the instance of an interruption message", "instance", id)
			continue
		}
		for i := range claims {
			if err := c.actOn(ctx, log.WithValues("instance", id, "nodeclaim", claims[i].Name), msg, &claims[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// actOn marks an interrupted spot offering unavailable, deletes the NodeClaim when the message
// kind says so, and records Events on the NodeClaim and its Node.
func (c *Controller) actOn(ctx context.Context, log logr.Logger, msg Message, nc *karpv1.NodeClaim) error {
	nodes := nodesOf(ctx, c.kube, nc, func(err error) {
		log.Error(err, "find the node of an interrupted nodeclaim; recording Events on the NodeClaim only")
	})
	if msg.Kind == KindSpotInterrupted {
		it, zone := nc.Labels[karpv1.LabelInstanceType], nc.Labels[karpv1.LabelTopologyZone]
		if it != "" && zone != "" {
			c.opts.Offerings.MarkUnavailable(it, zone, karpv1.CapacityTypeSpot)
			log.Info("marked the interrupted spot offering unavailable", "instanceType", it, "zone", zone)
		}
	}
	reason, note := eventOf(msg)
	if !msg.Kind.DeletesNodeClaims() {
		c.record(nc, nodes, reason, "Notify", note)
		log.Info("recorded an interruption notice", "reason", reason)
		return nil
	}
	deleted, err := c.deleter.delete(ctx, nc, false)
	if err != nil {
		return fmt.Errorf("instance %s: %w", strings.Join(msg.InstanceIDs, ","), err)
	}
	if !deleted {
		log.V(1).Info("nodeclaim of an interruption message is already being deleted")
		return nil
	}
	countDisrupted(c.metrics.Disrupted, string(msg.Kind), nc)
	c.record(nc, nodes, reason, "Delete", note+"; deleting the NodeClaim to drain and replace it")
	log.Info("deleting nodeclaim on an interruption message", "node", nc.Status.NodeName, "detail", msg.Detail)
	return nil
}

// record emits a Normal Event on the NodeClaim and each Node.
func (c *Controller) record(nc *karpv1.NodeClaim, nodes []corev1.Node, reason, action, note string) {
	record(c.opts.Recorder, nc, nodes, corev1.EventTypeNormal, reason, action, note)
}

// eventOf returns the Event reason and text of a message.
func eventOf(msg Message) (reason, note string) {
	switch msg.Kind {
	case KindSpotInterrupted:
		return "SpotInterrupted", "EC2 sent a spot interruption warning: it reclaims the instance in about two minutes"
	case KindRebalanceRecommendation:
		return "SpotRebalanceRecommendation", "EC2 recommends rebalancing: the spot instance is at elevated risk of interruption"
	case KindScheduledChange:
		return "ScheduledChange", fmt.Sprintf("AWS Health scheduled a change of the instance (%s)", msg.Detail)
	case KindInstanceStopped:
		return "InstanceStopping", fmt.Sprintf("The instance is %s", msg.Detail)
	case KindInstanceTerminated:
		return "InstanceTerminating", fmt.Sprintf("The instance is %s", msg.Detail)
	case KindCapacityReservationInterrupted:
		return "CapacityReservationInterrupted", "EC2 reclaims the instance from its capacity reservation"
	default:
		return "InterruptionMessage", "An interruption message named the instance"
	}
}
