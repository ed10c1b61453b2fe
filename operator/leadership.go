package operator

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Leader-election timings when Options leave them zero: those of controller-runtime and of the
// Kubernetes components (--leader-elect-lease-duration, -renew-deadline, -retry-period).
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
)

// ErrLeadershipLost is returned by Operator.Start when the manager stopped because it could not
// renew its Lease within RenewDeadline (the API server was unreachable or too slow), after every
// leader-only controller of the manager has returned. Run then campaigns again with a new manager.
var ErrLeadershipLost = errors.New("lost the leader-election Lease")

// lostLeadershipMessage is the error controller-runtime's manager returns when its Lease was lost
// (manager.Manager.Start; it has no sentinel). The fence (leaderWork) ends a term first, since it
// closes a RetryPeriod before client-go gives up; this is the backstop.
const lostLeadershipMessage = "leader election lost"

// CheckLeaderElectionTimings reports whether leader election can run with these timings: the
// leader must give up (RenewDeadline) before a follower may take over (LeaseDuration), and retry
// more than once in between.
func CheckLeaderElectionTimings(leaseDuration, renewDeadline, retryPeriod time.Duration) error {
	switch {
	case leaseDuration < time.Second:
		return fmt.Errorf("--leader-elect-lease-duration %s: want at least 1s (the Lease stores whole seconds)", leaseDuration)
	case retryPeriod <= 0:
		return fmt.Errorf("--leader-elect-retry-period %s: want a positive duration, such as %s", retryPeriod, DefaultRetryPeriod)
	case renewDeadline >= leaseDuration:
		return fmt.Errorf("--leader-elect-renew-deadline %s must be shorter than --leader-elect-lease-duration %s, "+
			"or a follower could take the Lease over while the leader still acts", renewDeadline, leaseDuration)
	case float64(renewDeadline) <= leaderelection.JitterFactor*float64(retryPeriod):
		return fmt.Errorf("--leader-elect-renew-deadline %s must be longer than %.1f times --leader-elect-retry-period %s, "+
			"so that the leader retries a failed renewal", renewDeadline, leaderelection.JitterFactor, retryPeriod)
	}
	return nil
}

// leaderElectionDefaults fills in the leader-election timings and identity, and checks the timings.
func (o *Options) leaderElectionDefaults() error {
	if o.LeaseDuration == 0 {
		o.LeaseDuration = DefaultLeaseDuration
	}
	if o.RenewDeadline == 0 {
		o.RenewDeadline = DefaultRenewDeadline
	}
	if o.RetryPeriod == 0 {
		o.RetryPeriod = DefaultRetryPeriod
	}
	if !o.LeaderElect {
		return nil
	}
	if err := CheckLeaderElectionTimings(o.LeaseDuration, o.RenewDeadline, o.RetryPeriod); err != nil {
		return err
	}
	if o.LeaderElectionIdentity == "" {
		id, err := NewLeaderElectionIdentity()
		if err != nil {
			return err
		}
		o.LeaderElectionIdentity = id
	}
	return nil
}

// NewLeaderElectionIdentity returns a holder identity unique to this call: the host name (the pod
// name in a cluster) and a random suffix, as controller-runtime makes them.
func NewLeaderElectionIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("leader-election identity: %w", err)
	}
	return host + "_" + string(uuid.NewUUID()), nil
}

// newLeaseLock returns the Lease lock of opts' identity, with a client whose requests time out
// well within RenewDeadline (as controller-runtime's own), so one hung request cannot use the
// whole deadline.
func newLeaseLock(cfg *rest.Config, opts Options) (*resourcelock.LeaseLock, error) {
	cfg = rest.AddUserAgent(rest.CopyConfig(cfg), "leader-election")
	cfg.Timeout = max(opts.RenewDeadline/2, time.Second)
	c, err := coordinationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("leader-election client: %w", err)
	}
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: opts.Namespace, Name: LeaderElectionID},
		Client:     c,
		LockConfig: resourcelock.ResourceLockConfig{Identity: opts.LeaderElectionIdentity},
	}, nil
}

// fencedLock is the Lease lock that tells the term's leaderWork when this replica has renewed the
// Lease (which arms the fence for RenewDeadline) or released it.
type fencedLock struct {
	*resourcelock.LeaseLock
	work *leaderWork
}

// Create creates the Lease and reports a success to the fence.
func (l fencedLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.LeaseLock.Create(ctx, ler)
	l.observe(ler, err)
	return err
}

// Update writes the Lease and reports a success to the fence.
func (l fencedLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	err := l.LeaseLock.Update(ctx, ler)
	l.observe(ler, err)
	return err
}

func (l fencedLock) observe(ler resourcelock.LeaderElectionRecord, err error) {
	switch {
	case err != nil:
	case ler.HolderIdentity == l.Identity():
		l.work.renewed()
	default:
		l.work.released()
	}
}

// isLeadershipLost reports whether err is controller-runtime's report of a lost Lease.
func isLeadershipLost(err error) bool {
	return err != nil && strings.Contains(err.Error(), lostLeadershipMessage)
}

// Run runs the operator until ctx ends. With leader election, a lost Lease does not end the
// process: once every leader-only controller of the manager has returned (Operator.Start waits
// for them, up to GracefulShutdown), Run builds a new manager that campaigns again under the same
// identity. The same identity lets this process take the Lease back at once when no other replica
// took it meanwhile (a single replica, or an apiserver that paused for everyone), instead of
// waiting LeaseDuration for a Lease it wrote itself. Each manager registers its metrics anew, as a
// restarted process would, and answers admission requests only once ready (readinessGate); the
// webhooks are not served between the two managers. Run returns nil when ctx ends, and an error
// when the operator cannot be built or fails otherwise, or when leader-only work did not stop in
// time (then only a new process is safe).
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	return run(ctx, cfg, opts, nil)
}

// run is Run with a hook that tests use to add runnables to each term's manager.
func run(ctx context.Context, cfg *rest.Config, opts Options, prepare func(*Operator) error) error {
	if opts.LeaderElect && opts.LeaderElectionIdentity == "" {
		id, err := NewLeaderElectionIdentity()
		if err != nil {
			return err
		}
		opts.LeaderElectionIdentity = id
	}
	for term := 1; ; term++ {
		op, err := New(cfg, opts)
		if err != nil {
			return err
		}
		if prepare != nil {
			if err := prepare(op); err != nil {
				op.stopProvider()
				return err
			}
		}
		err = op.Start(ctx)
		if ctx.Err() != nil || !errors.Is(err, ErrLeadershipLost) {
			return err
		}
		log := op.opts.Log
		log.Info("lost the leader-election Lease; every leader-only controller has stopped; campaigning again",
			"identity", opts.LeaderElectionIdentity, "term", term, "error", err.Error())
		// The next manager registers its own metrics and controllers of the same names.
		op.metrics.unregisterAll()
		opts.SkipControllerNameValidation = true
		if err := waitAddressesFree(ctx, listenAddresses(op.opts), op.opts.GracefulShutdown); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// listenAddresses are the addresses the operator's servers listen on.
func listenAddresses(o Options) []string {
	addrs := []string{net.JoinHostPort(o.WebhookHost, fmt.Sprint(o.WebhookPort))}
	for _, a := range []string{orDefault(o.MetricsAddr, ":8080"), orDefault(o.ProbeAddr, ":8081")} {
		if a != "0" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// waitAddressesFree waits until the stopped manager's servers have closed their listeners, so
// that the next manager can listen on the same addresses: controller-runtime closes them in the
// background after a lost Lease.
func waitAddressesFree(ctx context.Context, addrs []string, timeout time.Duration) error {
	var busy error
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		busy = nil
		for _, a := range addrs {
			if _, port, err := net.SplitHostPort(a); err == nil && port == "0" {
				continue // a port chosen at random is always free
			}
			l, err := net.Listen("tcp", a)
			if err != nil {
				busy = err
				return false, nil
			}
			_ = l.Close()
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("the stopped manager still listens after %s, so no new one can start: %w", timeout, busy)
	}
	return nil
}
