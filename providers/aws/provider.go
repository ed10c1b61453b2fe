package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/aws/nodeclass"
	"github.com/joiner-dev/joiner/providers/catalog"
)

// Name is the name of the AWS provider.
const Name = "aws"

// NodeClassKind is the kind of node class the provider serves, in group awsv1.Group.
const NodeClassKind = "EC2NodeClass"

// Drift reasons the provider reports.
const (
	// DriftReasonAMI means the instance runs an AMI the class no longer resolves for its type.
	DriftReasonAMI cloudprovider.DriftReason = "AMIDrift"
	// DriftReasonSecurityGroup means the instance's security groups differ from the class's.
	DriftReasonSecurityGroup cloudprovider.DriftReason = "SecurityGroupDrift"
	// DriftReasonSubnet means the instance's subnet is no longer among the class's.
	DriftReasonSubnet cloudprovider.DriftReason = "SubnetDrift"
	// DriftReasonNodeClass means the class's spec hash changed since launch.
	DriftReasonNodeClass cloudprovider.DriftReason = "NodeClassDrift"
)

// Options configure a Provider. Zero fields take the documented defaults.
type Options struct {
	// ClusterName names the cluster; it tags every instance and launch template. Required.
	ClusterName string
	// Region is the EC2 region. Required (Factory takes it from the SDK configuration).
	Region string
	// EC2 is the EC2 client. Required.
	EC2 EC2API
	// EKS, when set, is the last source of what nodes need to join: eks:DescribeCluster is asked
	// for the endpoint, certificate authority and service CIDR that no other source gave.
	EKS EKSAPI
	// ClusterEndpoint is the API server URL nodes join; ClusterCABundle its base64 PEM CA bundle
	// (Karpenter's clusterCABundle; the binary defaults it to the CA of its own kube client);
	// ServiceCIDR the service CIDR (AL2023 nodes need it). Empty ones come from the other sources
	// (clusterinfo.go).
	ClusterEndpoint, ClusterCABundle, ServiceCIDR string
	// ClusterReader, when set and ServiceCIDR is empty, reads the service CIDR from the cluster's
	// own ServiceCIDR object (ClusterServiceCIDR): one get, no watch, so an uncached reader fits.
	ClusterReader client.Reader
	// Catalog prices instance types and is the offline fallback; nil means catalog.Load().
	Catalog *catalog.Catalog
	// Clock times caches; nil means the real clock.
	Clock clock.Clock
	// DriftInstanceTTL is how long IsDrifted reuses an instance's description; zero means
	// DefaultDriftInstanceTTL.
	DriftInstanceTTL time.Duration
	// Log receives the provider's messages; the zero value discards them.
	Log logr.Logger
	// VMMemoryOverheadPercent is the share of memory taken off for the hypervisor; 0 means
	// DefaultVMMemoryOverheadPercent.
	VMMemoryOverheadPercent float64
	// ReservedENIs are network interfaces left out of the pod-density formula.
	ReservedENIs int
	// UnavailableTTL is how long an offering that ran out of capacity stays unavailable; 0 means
	// DefaultUnavailableTTL.
	UnavailableTTL time.Duration
	// LaunchTemplateIdleTTL is how long a launch template may go unused before it is deleted; 0
	// means DefaultLaunchTemplateIdleTTL.
	LaunchTemplateIdleTTL time.Duration
	// MaxInstanceTypes caps the instance types of one CreateFleet (60 when 0).
	MaxInstanceTypes int
}

// Provider is the AWS cloud provider. Create it with New; it is safe for concurrent use.
type Provider struct {
	kube        client.Client
	opts        Options
	clock       clock.Clock
	log         logr.Logger
	unavailable *UnavailableOfferings
	pricing     *Pricing
	source      *typeSource
	builder     *typeBuilder
	templates   *launchTemplates
	// driftInstances caches the instance descriptions IsDrifted compares with the class.
	driftInstances *instanceCache

	clusterMu sync.Mutex
	cluster   *clusterInfo
	// clusterAt is when cluster was found; an incomplete one is looked up again ClusterInfoRetry later.
	clusterAt time.Time
}

var _ cloudprovider.CloudProvider = (*Provider)(nil)

// New returns an AWS provider that reads NodePools and EC2NodeClasses through kube. It does not
// call AWS: the instance types are the embedded catalog's until Refresh reads them from EC2.
func New(kube client.Client, opts Options) (*Provider, error) {
	switch {
	case kube == nil:
		return nil, errors.New("new aws provider: a Kubernetes client is required")
	case opts.EC2 == nil:
		return nil, errors.New("new aws provider: an EC2 client is required")
	case opts.ClusterName == "":
		return nil, errors.New("new aws provider: the cluster name is required (--cluster-name)")
	case opts.Region == "":
		return nil, errors.New("new aws provider: the region is required (AWS_REGION or the SDK configuration)")
	}
	if opts.Catalog == nil {
		cat, err := catalog.Load()
		if err != nil {
			return nil, fmt.Errorf("new aws provider: load the instance type catalog: %w", err)
		}
		opts.Catalog = cat
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Log.GetSink() == nil {
		opts.Log = logr.Discard()
	}
	opts.VMMemoryOverheadPercent = defaults.Positive(opts.VMMemoryOverheadPercent, DefaultVMMemoryOverheadPercent)
	opts.MaxInstanceTypes = defaults.Positive(opts.MaxInstanceTypes, 60)
	p := &Provider{
		kube:           kube,
		opts:           opts,
		clock:          opts.Clock,
		log:            opts.Log,
		unavailable:    NewUnavailableOfferings(opts.Clock, opts.UnavailableTTL),
		pricing:        NewPricing(opts.Catalog, opts.Region),
		source:         &typeSource{api: opts.EC2, region: opts.Region, catalog: opts.Catalog},
		templates:      newLaunchTemplates(opts.EC2, opts.ClusterName, opts.Clock, opts.LaunchTemplateIdleTTL, opts.Log),
		driftInstances: newInstanceCache(opts.Clock, opts.DriftInstanceTTL),
	}
	p.source.useCatalog()
	p.builder = &typeBuilder{source: p.source, pricing: p.pricing, unavailable: p.unavailable, region: opts.Region, built: map[uint64]*builtTypes{}}
	return p, nil
}

// RepairPolicies returns Karpenter's AWS policies: Ready False or Unknown for 30 minutes, and
// the conditions the EKS node monitoring agent sets: AcceleratedHardwareReady False for 10
// minutes; StorageReady, NetworkingReady, KernelReady and ContainerRuntimeReady False for 30.
func (p *Provider) RepairPolicies() []cloudprovider.RepairPolicy {
	out := cloudprovider.ReadyRepairPolicies()
	out = append(out, cloudprovider.RepairPolicy{ConditionType: "AcceleratedHardwareReady", ConditionStatus: corev1.ConditionFalse, TolerationDuration: 10 * time.Minute})
	for _, c := range []corev1.NodeConditionType{"StorageReady", "NetworkingReady", "KernelReady", "ContainerRuntimeReady"} {
		out = append(out, cloudprovider.RepairPolicy{ConditionType: c, ConditionStatus: corev1.ConditionFalse, TolerationDuration: 30 * time.Minute})
	}
	return out
}

// Name returns "aws".
func (p *Provider) Name() string { return Name }

// UnavailableOfferings returns the provider's cache of offerings that ran out of capacity.
func (p *Provider) UnavailableOfferings() *UnavailableOfferings { return p.unavailable }

// Pricing returns the provider's prices.
func (p *Provider) Pricing() *Pricing { return p.pricing }

// RefreshInstanceTypes reads the instance types and their zones from EC2. Until it first
// succeeds the provider uses the embedded catalog.
func (p *Provider) RefreshInstanceTypes(ctx context.Context) error {
	return p.source.refresh(ctx, p.clock.Now())
}

// RefreshSpotPrices reads the current spot prices. Placeholder prices (as emulators return)
// are ignored, keeping the catalog's.
func (p *Provider) RefreshSpotPrices(ctx context.Context) error {
	kept, err := p.pricing.UpdateSpot(ctx, p.opts.EC2, p.clock.Now())
	if err != nil {
		return err
	}
	if _, rejected := p.pricing.SpotUpdated(); kept == 0 && rejected > 0 {
		p.log.Info("spot price history returned only placeholder prices; keeping the catalog's spot prices", "rejected", rejected)
	}
	return nil
}

// InstanceTypeSource returns where the instance types come from (TypeSourceEC2 or
// TypeSourceCatalog).
func (p *Provider) InstanceTypeSource() string {
	_, _, origin := p.source.snapshot()
	return origin
}

// CollectLaunchTemplates deletes this cluster's launch templates unused for the idle TTL and
// returns their names.
func (p *Provider) CollectLaunchTemplates(ctx context.Context) ([]string, error) {
	return p.templates.collect(ctx)
}

// DeleteLaunchTemplates deletes every launch template made for the EC2NodeClass (for its
// finalizer).
func (p *Provider) DeleteLaunchTemplates(ctx context.Context, nodeClass string) error {
	return p.templates.deleteForNodeClass(ctx, nodeClass)
}

// nodeClass returns the EC2NodeClass the reference names.
func (p *Provider) nodeClass(ctx context.Context, ref *karpv1.NodeClassReference, owner string) (*awsv1.EC2NodeClass, error) {
	if ref == nil {
		return nil, fmt.Errorf("%s has no nodeClassRef; set it to group %s, kind %s and the name of an %s", owner, awsv1.Group, NodeClassKind, NodeClassKind)
	}
	if ref.Group != awsv1.Group || ref.Kind != NodeClassKind {
		return nil, fmt.Errorf("%s: nodeClassRef names a %s of group %q, but the aws provider serves only %s of group %s", owner, ref.Kind, ref.Group, NodeClassKind, awsv1.Group)
	}
	nc := &awsv1.EC2NodeClass{}
	if err := p.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("%s: EC2NodeClass %q not found; create it or fix nodeClassRef.name", owner, ref.Name))
		}
		return nil, fmt.Errorf("%s: get EC2NodeClass %q: %w", owner, ref.Name, err)
	}
	return nc, nil
}

// readyNodeClass returns the class when it can be launched from (nodeclass.CheckReady: Ready for
// its current generation, with subnets, security groups, AMIs and an instance profile resolved),
// and a *NodeClassNotReadyError otherwise.
func (p *Provider) readyNodeClass(ctx context.Context, ref *karpv1.NodeClassReference, owner string) (*awsv1.EC2NodeClass, error) {
	nc, err := p.nodeClass(ctx, ref, owner)
	if err != nil {
		return nil, err
	}
	if !nc.DeletionTimestamp.IsZero() {
		return nil, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("%s: EC2NodeClass %s is being deleted", owner, nc.Name))
	}
	if err := nodeclass.CheckReady(nc); err != nil {
		return nil, fmt.Errorf("%s: %w", owner, err)
	}
	return nc, nil
}

// instanceTypesOf returns the built instance types of the class.
func (p *Provider) instanceTypesOf(nc *awsv1.EC2NodeClass) (*classView, *builtTypes, error) {
	view, err := newClassView(nc, p.opts.VMMemoryOverheadPercent, p.opts.ReservedENIs)
	if err != nil {
		return nil, nil, err
	}
	built, err := p.builder.get(view)
	if err != nil {
		return nil, nil, err
	}
	return view, built, nil
}

// GetInstanceTypes returns the instance types the NodePool's EC2NodeClass can launch: those
// offered in the zones of its subnets, served by one of its AMIs, with on-demand and (where EC2
// sells it) spot offerings per zone, priced, and marked unavailable while EC2 reports no
// capacity. The instance types are shared between calls and must not be modified.
func (p *Provider) GetInstanceTypes(ctx context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	if nodePool == nil {
		return nil, errors.New("get instance types: nodepool is nil")
	}
	nc, err := p.readyNodeClass(ctx, nodePool.Spec.Template.Spec.NodeClassRef, "nodepool "+nodePool.Name)
	if err != nil {
		return nil, fmt.Errorf("get instance types: %w", err)
	}
	_, built, err := p.instanceTypesOf(nc)
	if err != nil {
		return nil, fmt.Errorf("get instance types: %w", err)
	}
	return slices.Clone(built.types), nil
}
