package install_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/operator"
)

// waitLeader waits until exactly one of replicas leads: it is the only one whose
// leader_election_master_status is 1, and the Lease's holder was renewed after since. It returns
// the leader and the Lease's holder identity.
func waitLeader(t *testing.T, replicas []*replica, since time.Time, timeout time.Duration) (*replica, string) {
	t.Helper()
	var leader *replica
	var holder, last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		lease, err := readLease(ctx)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Time.Before(since.Truncate(time.Second)) {
			last = "the Lease was not renewed since " + since.Format(time.StampMilli)
			return false, nil
		}
		var leading []string
		leader = nil
		for _, r := range replicas {
			if r.masterStatus() == "1" {
				leading, leader = append(leading, r.pod), r
			}
		}
		if len(leading) != 1 {
			slices.Sort(leading)
			last = fmt.Sprintf("replicas reporting themselves leader: %v", leading)
			return false, nil
		}
		holder = ptr.Deref(lease.Spec.HolderIdentity, "")
		return true, nil
	})
	if err != nil {
		t.Fatalf("no single leader among %v within %s: %s", podNames(replicas), timeout, last)
	}
	return leader, holder
}

func readLease(ctx context.Context) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{}
	if err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: operator.LeaderElectionID}, lease); err != nil {
		return nil, fmt.Errorf("read the Lease %s/%s: %w", namespace, operator.LeaderElectionID, err)
	}
	return lease, nil
}

// handoverTimes is what one handover took, from the signal.
type handoverTimes struct {
	// exited: the old leader's process was gone; lease: another identity held the Lease;
	// working: the new leader had created the NodeClaim of a pod created once the old process was gone.
	exited, lease, working time.Duration
}

func (h handoverTimes) String() string {
	return fmt.Sprintf("%.1f s (process gone after %.1f s, Lease taken after %.1f s)", h.working.Seconds(), h.exited.Seconds(), h.lease.Seconds())
}

// handover signals the leader of replicas with sig and measures until another replica leads and
// works: the Lease names another holder, and pod number pod, created once the old process had
// exited (so that only a new leader can act on it), has its NodeClaim. It returns the old leader,
// the new one, and the times.
func handover(t *testing.T, replicas []*replica, sig syscall.Signal, l *launches, pod int) (old, leader *replica, h handoverTimes) {
	t.Helper()
	old, holder := waitLeader(t, replicas, time.Time{}, within)
	survivors := slices.DeleteFunc(slices.Clone(replicas), func(r *replica) bool { return r == old })
	// The endpoints controller takes a terminating pod out of the Service at once; so does the stand-in.
	route.setBackends(survivors...)
	start := time.Now()
	if err := old.signal(sig); err != nil {
		t.Fatal(err)
	}
	state, err := old.waitExit(35 * time.Second) // the chart's terminationGracePeriodSeconds is 30
	if err != nil {
		t.Fatal(err)
	}
	h.exited = time.Since(start)
	if sig == syscall.SIGTERM && !state.Success() {
		t.Errorf("pod %s exited with %v on SIGTERM, want a clean exit (log in %s)", old.pod, state, old.logPath)
	}
	l.createPod(t, pod)
	limit := operator.DefaultLeaseDuration + 30*time.Second
	err = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, limit, true, func(ctx context.Context) (bool, error) {
		if h.lease == 0 {
			if lease, err := readLease(ctx); err == nil && ptr.Deref(lease.Spec.HolderIdentity, "") != holder && ptr.Deref(lease.Spec.HolderIdentity, "") != "" {
				h.lease = time.Since(start)
			}
		}
		list := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, list); err != nil || len(list.Items) <= pod {
			return false, nil
		}
		h.working = time.Since(start)
		return h.lease != 0, nil
	})
	if err != nil {
		t.Fatalf("after %s to the leader %s: no new leader working within %s (Lease after %s)", sig, old.pod, limit, h.lease)
	}
	leader, _ = waitLeader(t, survivors, start, within)
	return old, leader, h
}

// electionTimings returns the lease duration and retry period the Deployment's args give, or the
// binary's defaults.
func electionTimings(t *testing.T, deploy *appsv1.Deployment) (lease, retry time.Duration) {
	t.Helper()
	lease, retry = operator.DefaultLeaseDuration, operator.DefaultRetryPeriod
	for _, c := range deploy.Spec.Template.Spec.Containers {
		for _, arg := range c.Args {
			flag, value, _ := strings.Cut(arg, "=")
			var into *time.Duration
			switch flag {
			case "--leader-elect-lease-duration":
				into = &lease
			case "--leader-elect-retry-period":
				into = &retry
			default:
				continue
			}
			d, err := time.ParseDuration(value)
			if err != nil {
				t.Fatalf("Deployment arg %s: %v", arg, err)
			}
			*into = d
		}
	}
	return lease, retry
}

// leaseBound is how long after a leader dies without releasing its Lease a follower may take it at
// the latest, in client-go's leader election: the Lease runs out lease after the follower last
// saw it renewed, the follower sees a renewal up to one of its retry waits late, and tries again
// after another (each wait is retry × [1, 1+JitterFactor]).
func leaseBound(lease, retry time.Duration) time.Duration {
	return lease + 2*time.Duration(float64(retry)*(1+leaderelection.JitterFactor))
}

func podNames(replicas []*replica) string {
	names := make([]string, len(replicas))
	for i, r := range replicas {
		names[i] = r.pod
	}
	return strings.Join(names, ", ")
}
