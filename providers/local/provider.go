package local

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/catalog"
	"github.com/joiner-dev/joiner/requirements"
)

// Name is the name of the local provider.
const Name = "local"

// DriftReasonZone is the drift reason of an instance whose zone its LocalNodeClass no longer
// offers (the class's region or zones changed).
const DriftReasonZone cloudprovider.DriftReason = "ZoneDrifted"

// DriftReasonNodeClass is the drift reason of an instance launched from a LocalNodeClass whose
// other node-shaping fields (its labels) have changed since, as the AWS provider's NodeClassDrift.
const DriftReasonNodeClass cloudprovider.DriftReason = "NodeClassDrift"

// ReasonLaunchFailed is the reason of the *cloudprovider.CreateError of an injected launch
// failure.
const ReasonLaunchFailed = "LaunchFailed"

const (
	// nodeGoneGrace is how long a Node this process created may be missing from reads (a cache
	// that has not caught up) before its instance counts as terminated.
	nodeGoneGrace = time.Minute
	// terminatedTTL is how long the provider remembers the instances it terminated, so that their
	// Nodes, which may linger while finalizers run, are not mistaken for running instances.
	terminatedTTL = time.Hour
	// registrationRetryInterval is the wait between attempts to create a Node.
	registrationRetryInterval = time.Second
)

// Options configure a Provider. Zero fields take the documented defaults.
type Options struct {
	// Catalog provides instance types and prices; nil means catalog.Load().
	Catalog *catalog.Catalog
	// Clock times node registration; nil means the real clock.
	Clock clock.Clock
	// Log receives the provider's messages; the zero value discards them.
	Log logr.Logger
	// Failures are the failures to inject; nil means a new, empty Failures (see
	// Provider.Failures).
	Failures *Failures
}

// Provider is the local cloud provider. Create it with New; it is safe for concurrent use.
type Provider struct {
	kube     client.Client
	catalog  *catalog.Catalog
	clock    clock.Clock
	log      logr.Logger
	failures *Failures
	types    *typeCache
	ctx      context.Context
	wg       sync.WaitGroup

	mu         sync.Mutex
	instances  map[string]*instance // by provider ID
	terminated map[string]time.Time // provider ID -> when this process terminated it
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// New returns a local provider that reads LocalNodeClasses and creates, reads and deletes Nodes
// through kube, whose scheme must hold core/v1 and joiner.dev/v1alpha1. ctx bounds the provider's
// life: once it is done, pending registrations stop and Create fails.
func New(ctx context.Context, kube client.Client, opts Options) (*Provider, error) {
	if kube == nil {
		return nil, errors.New("new local provider: a Kubernetes client is required")
	}
	p := &Provider{
		kube:       kube,
		catalog:    opts.Catalog,
		clock:      opts.Clock,
		log:        opts.Log,
		failures:   opts.Failures,
		ctx:        ctx,
		instances:  map[string]*instance{},
		terminated: map[string]time.Time{},
	}
	if p.catalog == nil {
		cat, err := catalog.Load()
		if err != nil {
			return nil, fmt.Errorf("new local provider: load the instance type catalog: %w", err)
		}
		p.catalog = cat
	}
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.log.GetSink() == nil {
		p.log = logr.Discard()
	}
	if p.failures == nil {
		p.failures = &Failures{}
	}
	p.types = newTypeCache(p.catalog)
	return p, nil
}

// Name returns "local".
func (p *Provider) Name() string { return Name }

// Failures returns the provider's failure injection, which tests may change at any time.
func (p *Provider) Failures() *Failures { return p.failures }

// Wait blocks until the context given to New is done and every pending registration has
// stopped. It returns at once when both already hold.
func (p *Provider) Wait() {
	<-p.ctx.Done()
	// Create adds to the wait group under mu only while ctx is live, so once ctx is done and mu
	// has been taken, no Add can race with Wait.
	p.mu.Lock()
	p.mu.Unlock() //nolint:staticcheck // An empty critical section on purpose: see above.
	p.wg.Wait()
}

// GetInstanceTypes returns the catalog's instance types of the NodePool's LocalNodeClass: those
// of its region offered in at least one of its zones, each with spot and on-demand offerings per
// zone, priced from the catalog. Offerings under an announced injected shortage are unavailable.
// The instance types are shared between calls and must not be modified; the slice is the
// caller's.
func (p *Provider) GetInstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	if nodePool == nil {
		return nil, errors.New("get instance types: nodepool is nil")
	}
	class, err := p.nodeClass(ctx, nodePool.Spec.Template.Spec.NodeClassRef, "nodepool "+nodePool.Name)
	if err != nil {
		return nil, fmt.Errorf("get instance types: %w", err)
	}
	return slices.Clone(p.types.get(class.Region, class.Zones, p.failures).types), nil
}

// Create launches an instance for the NodeClaim: among the instance types its requirements allow
// and its resource requests fit, it takes the cheapest available offering that is not short of
// capacity, records the instance and, after the LocalNodeClass's nodeRegistrationDelay, creates
// its Node. It returns a copy of the NodeClaim with status.providerID, capacity, allocatable,
// the instance's labels, the class's hash annotations (NodeClassHashAnnotationKey) and the launch
// record (InstanceAnnotationKey), which lets a restarted provider finish the launch. When an
// instance was launched for this NodeClaim (same UID) already, by this provider or one before a
// restart, and not terminated, it returns that instance instead of launching another. When only
// offerings short of capacity (or none at all) remain it returns an *InsufficientCapacityError.
func (p *Provider) Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	if failed, err := p.failures.takeLaunchFailure(); failed {
		if err == nil {
			err = cloudprovider.NewCreateError(errInjectedLaunchFailure, ReasonLaunchFailed,
				fmt.Sprintf("launching nodeclaim %s failed (injected failure)", nodeClaim.Name))
		}
		return nil, err
	}
	class, err := p.nodeClass(ctx, nodeClaim.Spec.NodeClassRef, "nodeclaim "+nodeClaim.Name)
	if err != nil {
		return nil, fmt.Errorf("launch nodeclaim %s: %w", nodeClaim.Name, err)
	}
	// A launch for this very NodeClaim that its status does not show (the process stopped before
	// writing it) is returned rather than repeated.
	if out, err := p.relaunched(ctx, nodeClaim, class); err != nil || out != nil {
		if err != nil {
			return nil, fmt.Errorf("launch nodeclaim %s: %w", nodeClaim.Name, err)
		}
		return out, nil
	}
	reqs, err := requirements.FromNodeSelectorRequirementsWithMinValues(nodeClaim.Spec.Requirements...)
	if err != nil {
		return nil, fmt.Errorf("launch nodeclaim %s: spec.requirements: %w", nodeClaim.Name, err)
	}
	built := p.types.get(class.Region, class.Zones, p.failures)
	best, bestShort := pickOffering(built.types, reqs, nodeClaim.Spec.Resources.Requests, p.failures)
	if best.it == nil {
		if bestShort.it != nil {
			return nil, cloudprovider.NewInsufficientCapacityError(bestShort.it.Name, bestShort.o.Zone(), bestShort.o.CapacityType(),
				errors.New("every allowed offering is short of capacity (injected)"))
		}
		return nil, cloudprovider.NewInsufficientCapacityError("", "", "", fmt.Errorf(
			"no available offering of LocalNodeClass %s (region %s, zones %s) satisfies requirements [%s] with requests %s",
			class.Name, class.Region, strings.Join(class.Zones, ", "), reqs, formatResources(nodeClaim.Spec.Resources.Requests)))
	}
	return p.launch(nodeClaim, class, built.templates[best.it.Name], best)
}

// offeringChoice is an instance type and one of its offerings.
type offeringChoice struct {
	it *cloudprovider.InstanceType
	o  *cloudprovider.Offering
}

// cheaper orders choices by price, then type name, zone and capacity type, so that picks are
// deterministic.
func (c offeringChoice) cheaper(than offeringChoice) bool {
	if than.it == nil {
		return true
	}
	return cmp.Or(
		cmp.Compare(c.o.Price, than.o.Price),
		cmp.Compare(c.it.Name, than.it.Name),
		cmp.Compare(c.o.Zone(), than.o.Zone()),
		cmp.Compare(c.o.CapacityType(), than.o.CapacityType()),
	) < 0
}

// pickOffering returns the cheapest available offering compatible with reqs of a type that fits
// requests and is not short of capacity, and the cheapest of those that are short.
func pickOffering(types cloudprovider.InstanceTypes, reqs requirements.Requirements, requests corev1.ResourceList, failures *Failures) (best, bestShort offeringChoice) {
	for _, it := range types {
		if _, conflict := reqs.FirstConflict(it.Requirements); conflict || !it.Fits(requests) {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Available || !o.CompatibleWith(reqs) {
				continue
			}
			c := offeringChoice{it: it, o: o}
			if failures.short(it.Name, o.Zone(), o.CapacityType(), false) {
				if c.cheaper(bestShort) {
					bestShort = c
				}
			} else if c.cheaper(best) {
				best = c
			}
		}
	}
	return best, bestShort
}

// Delete terminates the NodeClaim's instance: it deletes the instance's Node (kwok's kubelet
// stops with it) and forgets the instance, or stops its registration if the Node is not created
// yet (also for an instance launched before a restart that the NodeClaim's launch record
// describes). It returns a *NodeClaimNotFoundError when the instance is already gone.
func (p *Provider) Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error {
	pid := nodeClaim.Status.ProviderID
	if pid == "" {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("nodeclaim %s has no status.providerID", nodeClaim.Name))
	}
	iid, err := ParseProviderID(pid)
	if err != nil {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("delete nodeclaim %s: %w", nodeClaim.Name, err))
	}
	p.mu.Lock()
	inst := p.instances[pid]
	_, terminated := p.terminated[pid]
	var node *corev1.Node
	if inst != nil && inst.nodeUID != "" {
		node = inst.createdNode()
	}
	p.mu.Unlock()
	if inst == nil && terminated {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s was terminated", pid))
	}
	if node == nil {
		// Not created by this process, or not yet: look for it.
		n, err := p.getNode(ctx, iid.ID)
		if err != nil {
			return fmt.Errorf("delete nodeclaim %s: %w", nodeClaim.Name, err)
		}
		if n != nil && n.Spec.ProviderID == pid {
			node = n
		}
	}
	if inst == nil && node == nil {
		if rec, ok := pendingRecord(nodeClaim); ok && rec.ProviderID == pid {
			// Launched by an earlier provider and known only through its NodeClaim: forgetting it
			// (and so never creating its Node) terminates it.
			p.mu.Lock()
			p.forgetLocked(pid)
			p.mu.Unlock()
			p.log.Info("terminated instance before it registered", "providerID", pid, "nodeclaim", nodeClaim.Name)
			return nil
		}
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("no instance %s", pid))
	}
	if node != nil {
		if err := p.deleteNode(ctx, node); err != nil {
			return fmt.Errorf("delete nodeclaim %s: terminate instance %s: %w", nodeClaim.Name, pid, err)
		}
	}
	p.mu.Lock()
	p.forgetLocked(pid)
	p.mu.Unlock()
	p.log.Info("terminated instance", "providerID", pid, "nodeclaim", nodeClaim.Name)
	return nil
}

// Get returns the NodeClaim of the instance with the provider ID: the one Create returned (with
// the launch time as creationTimestamp) for instances launched by this process, one made from
// the Node for instances found only through their Node, or one made from the NodeClaim that
// recorded the launch for instances launched before a restart that have no Node yet.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	iid, err := ParseProviderID(providerID)
	if err != nil {
		return nil, cloudprovider.NewNodeClaimNotFoundError(err)
	}
	p.mu.Lock()
	inst := p.instances[providerID]
	_, terminated := p.terminated[providerID]
	if inst == nil && terminated {
		p.mu.Unlock()
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s was terminated", providerID))
	}
	if inst != nil && inst.registeredAt.IsZero() {
		defer p.mu.Unlock()
		return inst.nodeClaim.DeepCopy(), nil
	}
	p.mu.Unlock()

	node, err := p.getNode(ctx, iid.ID)
	if err != nil {
		return nil, fmt.Errorf("get instance %s: %w", providerID, err)
	}
	ours := node != nil && node.Spec.ProviderID == providerID
	if inst != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !ours && p.nodeGoneLocked(inst) {
			return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s terminated: its Node is gone", providerID))
		}
		return inst.nodeClaim.DeepCopy(), nil
	}
	if ours {
		return nodeClaimFromNode(node), nil
	}
	// Launched by an earlier provider (before a restart) and not registered yet: the NodeClaim's
	// launch record says it exists.
	pl, err := p.pendingLaunchOf(ctx, providerID)
	if err != nil {
		return nil, fmt.Errorf("get instance %s: %w", providerID, err)
	}
	if pl != nil {
		p.mu.Lock()
		_, terminated = p.terminated[providerID]
		p.mu.Unlock()
		if !terminated {
			return pl.describe(), nil
		}
	}
	return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("no instance %s", providerID))
}

// List returns a NodeClaim for every running local instance: those this process launched, those
// whose Nodes exist (for instance launched before a restart), and those launched before a restart
// whose NodeClaim recorded the launch but that have no Node yet, ordered by provider ID.
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	pending, err := p.pendingLaunches(ctx)
	if err != nil {
		return nil, fmt.Errorf("list local instances: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := p.kube.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("list local instances: list nodes: %w", err)
	}
	byProviderID := map[string]*corev1.Node{}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if strings.HasPrefix(n.Spec.ProviderID, ProviderIDPrefix) {
			byProviderID[n.Spec.ProviderID] = n
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*karpv1.NodeClaim, 0, len(p.instances)+len(byProviderID))
	for pid, inst := range p.instances {
		if _, ok := byProviderID[pid]; !ok && p.nodeGoneLocked(inst) {
			continue
		}
		out = append(out, inst.nodeClaim.DeepCopy())
	}
	for pid, n := range byProviderID {
		if _, ok := p.instances[pid]; ok {
			continue
		}
		if _, ok := p.terminated[pid]; ok {
			continue
		}
		out = append(out, nodeClaimFromNode(n))
	}
	for pid, pl := range pending {
		if _, ok := p.instances[pid]; ok {
			continue
		}
		if _, ok := p.terminated[pid]; ok {
			continue
		}
		if _, ok := byProviderID[pid]; ok {
			continue
		}
		out = append(out, pl.describe())
	}
	slices.SortFunc(out, func(a, b *karpv1.NodeClaim) int { return cmp.Compare(a.Status.ProviderID, b.Status.ProviderID) })
	return out, nil
}

// IsDrifted returns DriftReasonZone when the NodeClaim's LocalNodeClass no longer offers the
// instance's zone (its region or zones changed), DriftReasonNodeClass when the class's hash
// (ResolvedNodeClass.Hash) differs from the one stamped on the NodeClaim at launch under the same hash
// version, and "" otherwise. A change of the registration delay shapes no node and drifts none.
func (p *Provider) IsDrifted(ctx context.Context, nodeClaim *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	class, err := p.nodeClass(ctx, nodeClaim.Spec.NodeClassRef, "nodeclaim "+nodeClaim.Name)
	if err != nil {
		return "", fmt.Errorf("check drift of nodeclaim %s: %w", nodeClaim.Name, err)
	}
	zone := nodeClaim.Labels[karpv1.LabelTopologyZone]
	if iid, err := ParseProviderID(nodeClaim.Status.ProviderID); err == nil {
		if iid.Region != class.Region {
			return DriftReasonZone, nil
		}
		zone = iid.Zone
	}
	if zone != "" && !slices.Contains(class.Zones, zone) {
		return DriftReasonZone, nil
	}
	// Like Karpenter's hashes, the stamp is compared only under the same version, and a NodeClaim
	// without one (launched before stamps existed) never drifts by it.
	hash, ok1 := nodeClaim.Annotations[NodeClassHashAnnotationKey]
	version, ok2 := nodeClaim.Annotations[NodeClassHashVersionAnnotationKey]
	if ok1 && ok2 && version == NodeClassHashVersion && hash != class.Hash() {
		return DriftReasonNodeClass, nil
	}
	return "", nil
}

// nodeGoneLocked reports whether the registered instance's Node has been missing long enough to
// count the instance as terminated, and forgets the instance if so. inst's Node must have been
// found missing by the caller. p.mu must be held.
func (p *Provider) nodeGoneLocked(inst *instance) bool {
	if inst.registeredAt.IsZero() || p.clock.Since(inst.registeredAt) <= nodeGoneGrace {
		return false
	}
	p.log.Info("instance terminated: its Node is gone", "providerID", inst.providerID)
	p.forgetLocked(inst.providerID)
	return true
}

// forgetLocked drops the instance record, stops its registration and remembers that the
// instance is terminated. p.mu must be held.
func (p *Provider) forgetLocked(pid string) {
	if inst, ok := p.instances[pid]; ok {
		delete(p.instances, pid)
		if !inst.deleted {
			inst.deleted = true
			close(inst.stop)
		}
	}
	now := p.clock.Now()
	for id, at := range p.terminated {
		if now.Sub(at) > terminatedTTL {
			delete(p.terminated, id)
		}
	}
	p.terminated[pid] = now
}

// nodeClaimFromNode describes an instance found only through its Node.
func nodeClaimFromNode(n *corev1.Node) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{}
	nc.CreationTimestamp = n.CreationTimestamp
	for _, ref := range n.OwnerReferences {
		if ref.Kind == "NodeClaim" && strings.HasPrefix(ref.APIVersion, karpv1.Group+"/") {
			nc.Name = ref.Name
		}
	}
	if len(n.Labels) > 0 {
		nc.Labels = make(map[string]string, len(n.Labels))
		for k, v := range n.Labels {
			nc.Labels[k] = v
		}
	}
	nc.Status.ProviderID = n.Spec.ProviderID
	nc.Status.NodeName = n.Name
	nc.Status.Capacity = n.Status.Capacity.DeepCopy()
	nc.Status.Allocatable = n.Status.Allocatable.DeepCopy()
	return nc
}

// formatResources prints a resource list in name order, as "cpu=2, memory=1Gi".
func formatResources(l corev1.ResourceList) string {
	if len(l) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(l))
	for name, q := range l {
		parts = append(parts, string(name)+"="+q.String())
	}
	slices.Sort(parts)
	return strings.Join(parts, ", ")
}

// Factory returns the operator's cloudprovider.Factory for the local provider: a Provider on the
// operator's client (opts.Catalog, Clock and Log as in New; Failures is the test hook), together
// with its LocalNodeClass status controller and the runnable that, once at start on the leader,
// resumes the launches of the process before a restart (Provider.Resume).
func Factory(opts Options) cloudprovider.Factory {
	return func(ctx context.Context, kube client.Client) (cloudprovider.CloudProvider, []cloudprovider.Controller, error) {
		p, err := New(ctx, kube, opts)
		if err != nil {
			return nil, nil, err
		}
		nc, err := NewNodeClassController(kube, p.catalog, p.clock)
		if err != nil {
			return nil, nil, err
		}
		return p, []cloudprovider.Controller{nc, resumer{p: p}}, nil
	}
}
