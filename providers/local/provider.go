package local

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

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
	p.clock = defaults.Clock(p.clock)
	if p.log.GetSink() == nil {
		p.log = logr.Discard()
	}
	if p.failures == nil {
		p.failures = &Failures{}
	}
	p.types = newTypeCache(p.catalog)
	return p, nil
}

// RepairPolicies returns Karpenter's Ready policies: a Node whose Ready condition has been False
// or Unknown for 30 minutes is repaired. The local provider's Nodes have no other conditions.
func (p *Provider) RepairPolicies() []cloudprovider.RepairPolicy {
	return cloudprovider.ReadyRepairPolicies()
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
