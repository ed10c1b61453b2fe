package local

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// How the local provider survives a restart. A real cloud keeps an instance whatever happens to
// the process that launched it; the local provider keeps its instances in memory until their
// Node exists, so it writes down each launch where the next process can read it:
//
//   - Create returns the NodeClaim with the annotation InstanceAnnotationKey holding the launch
//     record (provider ID, instance type, zone, capacity type, launch time, registration delay,
//     the NodeClaim's UID), which the lifecycle controller writes to the NodeClaim with the rest
//     of the launch's result; the Node the instance registers carries it too.
//   - Get, List and Delete of a provider that did not launch an instance find it, until its Node
//     exists, through the NodeClaim that recorded it (status.providerID and the record, not
//     Registered).
//   - Resume (run once at start by the controller Factory adds) schedules the registration of
//     those instances at their launch time plus their registration delay, or at once when that
//     has passed.
//   - Create of a NodeClaim whose launch was not recorded in its status (the process stopped
//     between the launch and that write) returns the instance already launched for it, found by
//     the record on the NodeClaim or on its Node, instead of launching a second one.
//
// A launch that left no trace (neither its record on the NodeClaim nor a Node) is lost with the
// process, as if the instance had never started: its NodeClaim, not Launched, launches again.

// InstanceAnnotationKey is the annotation holding the launch record of a local instance, on the
// NodeClaim Create returns (and so on the NodeClaim) and on the instance's Node.
const InstanceAnnotationKey = "joiner.dev/local-instance"

// resumeRetryMax bounds the wait between attempts of the resumer.
const resumeRetryMax = 30 * time.Second

// launchRecord is what the provider writes down about a launch, as JSON in InstanceAnnotationKey.
type launchRecord struct {
	// NodeClaimUID is the UID of the NodeClaim the instance was launched for.
	NodeClaimUID types.UID `json:"nodeClaimUID,omitempty"`
	// ProviderID is the instance's provider ID (its region, zone and ID).
	ProviderID   string `json:"providerID"`
	InstanceType string `json:"instanceType"`
	Zone         string `json:"zone"`
	CapacityType string `json:"capacityType"`
	// LaunchTime is when the instance was launched.
	LaunchTime metav1.MicroTime `json:"launchTime"`
	// RegistrationDelay is how long after LaunchTime the instance creates its Node.
	RegistrationDelay metav1.Duration `json:"registrationDelay"`
	// NeverRegisters is set for instances of a type failure injection keeps from registering.
	NeverRegisters bool `json:"neverRegisters,omitempty"`
}

func (r launchRecord) encode() string {
	b, err := json.Marshal(r)
	if err != nil {
		// Strings, a bool, a time and a duration always marshal.
		panic(fmt.Sprintf("encode launch record of %s: %v", r.ProviderID, err))
	}
	return string(b)
}

// registersAt is when the instance creates its Node.
func (r launchRecord) registersAt() time.Time {
	return r.LaunchTime.Add(r.RegistrationDelay.Duration)
}

// recordOf returns the launch record in annotations, if there is a valid one.
func recordOf(annotations map[string]string) (launchRecord, bool) {
	v, ok := annotations[InstanceAnnotationKey]
	if !ok {
		return launchRecord{}, false
	}
	var r launchRecord
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return launchRecord{}, false
	}
	if _, err := ParseProviderID(r.ProviderID); err != nil || r.InstanceType == "" || r.LaunchTime.IsZero() {
		return launchRecord{}, false
	}
	return r, true
}

// pendingRecord returns the launch record of a NodeClaim that recorded its launch (its status
// names the instance of the record) and whose Node has not registered.
func pendingRecord(nc *karpv1.NodeClaim) (launchRecord, bool) {
	rec, ok := recordOf(nc.Annotations)
	if !ok || nc.Status.ProviderID != rec.ProviderID || nc.Status.NodeName != "" {
		return launchRecord{}, false
	}
	if rec.NodeClaimUID != "" && nc.UID != "" && rec.NodeClaimUID != nc.UID {
		return launchRecord{}, false
	}
	if c := nc.StatusCondition(karpv1.ConditionTypeRegistered); c != nil && c.Status == metav1.ConditionTrue {
		return launchRecord{}, false
	}
	return rec, true
}

// pendingLaunch is an instance known only through the NodeClaim that recorded its launch.
type pendingLaunch struct {
	nodeClaim *karpv1.NodeClaim
	rec       launchRecord
}

// describe returns what Get and List say of the instance: the launched NodeClaim, created at
// launch time.
func (pl pendingLaunch) describe() *karpv1.NodeClaim {
	nc := pl.nodeClaim
	out := &karpv1.NodeClaim{}
	out.Name = nc.Name
	out.CreationTimestamp = metav1.NewTime(pl.rec.LaunchTime.Time)
	out.Labels = maps.Clone(nc.Labels)
	out.Annotations = maps.Clone(nc.Annotations)
	out.Spec = *nc.Spec.DeepCopy()
	out.Status.ProviderID = pl.rec.ProviderID
	out.Status.ImageID = nc.Status.ImageID
	out.Status.Capacity = nc.Status.Capacity.DeepCopy()
	out.Status.Allocatable = nc.Status.Allocatable.DeepCopy()
	return out
}

// pendingLaunches returns, by provider ID, the launches recorded on NodeClaims whose Node has
// not registered.
func (p *Provider) pendingLaunches(ctx context.Context) (map[string]pendingLaunch, error) {
	list := &karpv1.NodeClaimList{}
	if err := p.kube.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list nodeclaims: %w", err)
	}
	out := map[string]pendingLaunch{}
	for i := range list.Items {
		nc := &list.Items[i]
		if rec, ok := pendingRecord(nc); ok {
			out[rec.ProviderID] = pendingLaunch{nodeClaim: nc, rec: rec}
		}
	}
	return out, nil
}

// pendingLaunchOf returns the launch of the instance recorded on a NodeClaim whose Node has not
// registered, or nil.
func (p *Provider) pendingLaunchOf(ctx context.Context, providerID string) (*pendingLaunch, error) {
	pending, err := p.pendingLaunches(ctx)
	if err != nil {
		return nil, err
	}
	if pl, ok := pending[providerID]; ok {
		return &pl, nil
	}
	return nil, nil
}

// Resume takes over the launches of earlier providers on the same cluster (the process that ran
// before a restart) whose Node has not registered yet: for each NodeClaim that recorded such a
// launch and is not being deleted, it records the instance and schedules the creation of its Node
// at the record's launch time plus registration delay, or at once when that has passed.
// Instances this provider knows already, has terminated, or whose Node exists are left alone, so
// calling it again is harmless. It returns how many launches it took over.
func (p *Provider) Resume(ctx context.Context) (int, error) {
	pending, err := p.pendingLaunches(ctx)
	if err != nil {
		return 0, fmt.Errorf("resume local launches: %w", err)
	}
	if len(pending) == 0 {
		return 0, nil
	}
	nodes := &corev1.NodeList{}
	if err := p.kube.List(ctx, nodes); err != nil {
		return 0, fmt.Errorf("resume local launches: list nodes: %w", err)
	}
	for i := range nodes.Items {
		delete(pending, nodes.Items[i].Spec.ProviderID)
	}
	resumed := 0
	for pid, pl := range pending {
		if !pl.nodeClaim.DeletionTimestamp.IsZero() {
			continue
		}
		iid, err := ParseProviderID(pid)
		if err != nil {
			continue
		}
		launched := pl.describe()
		inst := &instance{id: iid, providerID: pid, nodeClaim: launched, node: newNode(iid, launched, pl.rec), stop: make(chan struct{})}
		p.mu.Lock()
		if err := p.ctx.Err(); err != nil {
			p.mu.Unlock()
			return resumed, fmt.Errorf("resume local launches: the local provider has stopped: %w", err)
		}
		_, terminated := p.terminated[pid]
		took := p.instances[pid] == nil && !terminated
		if took {
			p.recordLocked(inst, pl.rec)
			resumed++
		}
		p.mu.Unlock()
		if took {
			p.log.Info("resumed the launch of an instance", "nodeclaim", pl.nodeClaim.Name, "providerID", pid,
				"instanceType", pl.rec.InstanceType, "registers", !pl.rec.NeverRegisters,
				"registersIn", max(pl.rec.registersAt().Sub(p.clock.Now()), 0).String())
		}
	}
	return resumed, nil
}

// relaunched returns what Create returns for the instance already launched for this NodeClaim
// (same UID), by this provider or an earlier one, when the NodeClaim's status does not record it:
// the process that launched it may have stopped between the launch and that write. The launch is
// found by its record on the NodeClaim (its metadata was written, its status not) or on the
// instance's Node (it registered before the NodeClaim recorded it). It returns nil when there is
// no such instance, or when it was terminated.
func (p *Provider) relaunched(ctx context.Context, nodeClaim *karpv1.NodeClaim, class ResolvedNodeClass) (*karpv1.NodeClaim, error) {
	if nodeClaim.UID == "" {
		return nil, nil
	}
	rec, ok := recordOf(nodeClaim.Annotations)
	if !ok || rec.NodeClaimUID != nodeClaim.UID {
		var err error
		if rec, ok, err = p.recordOnNode(ctx, nodeClaim.UID); err != nil || !ok {
			return nil, err
		}
	}
	iid, err := ParseProviderID(rec.ProviderID)
	if err != nil {
		return nil, nil
	}
	p.mu.Lock()
	_, terminated := p.terminated[rec.ProviderID]
	p.mu.Unlock()
	if terminated {
		return nil, nil
	}
	built := p.types.get(iid.Region, []string{iid.Zone}, p.failures)
	tmpl := built.templates[rec.InstanceType]
	var choice offeringChoice
	for _, it := range built.types {
		if it.Name != rec.InstanceType {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType() == rec.CapacityType {
				choice = offeringChoice{it: it, o: o}
			}
		}
	}
	if tmpl == nil || choice.it == nil {
		p.log.Info("cannot take over an earlier launch: the catalog no longer has its offering; launching anew",
			"nodeclaim", nodeClaim.Name, "providerID", rec.ProviderID, "instanceType", rec.InstanceType, "capacityType", rec.CapacityType)
		return nil, nil
	}
	out, known, err := p.start(nodeClaim, class, tmpl, choice, rec)
	if err != nil {
		return nil, err
	}
	if !known {
		p.log.Info("took over an earlier launch of the nodeclaim", "nodeclaim", nodeClaim.Name, "providerID", rec.ProviderID,
			"instanceType", rec.InstanceType, "registers", !rec.NeverRegisters)
	}
	return out, nil
}

// recordOnNode returns the launch record on the Node of an instance launched for the NodeClaim
// with the UID, if one exists and is not being deleted.
func (p *Provider) recordOnNode(ctx context.Context, uid types.UID) (launchRecord, bool, error) {
	nodes := &corev1.NodeList{}
	if err := p.kube.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return launchRecord{}, false, fmt.Errorf("look for the node of an earlier launch: list nodes: %w", err)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !strings.HasPrefix(n.Spec.ProviderID, ProviderIDPrefix) || !n.DeletionTimestamp.IsZero() {
			continue
		}
		if rec, ok := recordOf(n.Annotations); ok && rec.NodeClaimUID == uid && rec.ProviderID == n.Spec.ProviderID {
			return rec, true, nil
		}
	}
	return launchRecord{}, false, nil
}

// resumer runs Provider.Resume once the manager's caches are synced, on the leader only,
// retrying until it succeeds or the manager stops.
type resumer struct{ p *Provider }

var (
	_ cloudprovider.Controller       = resumer{}
	_ manager.Runnable               = resumer{}
	_ manager.LeaderElectionRunnable = resumer{}
)

// SetupWithManager adds the resumer to mgr.
func (r resumer) SetupWithManager(mgr manager.Manager) error {
	if err := mgr.Add(r); err != nil {
		return fmt.Errorf("add the local provider's resumer: %w", err)
	}
	return nil
}

// NeedLeaderElection makes the resumer run on the leader, which launches.
func (r resumer) NeedLeaderElection() bool { return true }

// Start resumes the earlier launches, retrying with backoff on errors.
func (r resumer) Start(ctx context.Context) error {
	wait := time.Second
	for {
		n, err := r.p.Resume(ctx)
		if err == nil {
			if n > 0 {
				r.p.log.Info("resumed the launches of an earlier process", "instances", n)
			}
			return nil
		}
		if ctx.Err() != nil || r.p.ctx.Err() != nil {
			return nil
		}
		r.p.log.Error(err, "resume the launches of an earlier process; retrying", "in", wait.String())
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, resumeRetryMax)
	}
}
