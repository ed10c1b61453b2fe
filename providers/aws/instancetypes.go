package aws

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/catalog"
	"github.com/joiner-dev/joiner/requirements"
)

// Where the instance types came from.
const (
	// TypeSourceEC2 means DescribeInstanceTypes and DescribeInstanceTypeOfferings.
	TypeSourceEC2 = "ec2"
	// TypeSourceCatalog means the embedded catalog (EC2 could not be read yet).
	TypeSourceCatalog = "catalog"
)

// typeSource holds the instance types of the region and the zones each is offered in, read from
// EC2 and refreshed, or from the embedded catalog until EC2 answers. It is safe for concurrent use.
type typeSource struct {
	api     EC2API
	region  string
	catalog *catalog.Catalog

	mu      sync.RWMutex
	infos   []typeInfo // sorted by name
	origin  string
	version uint64
	updated time.Time
}

// snapshot returns the current types (shared; do not modify), their version and origin.
func (s *typeSource) snapshot() ([]typeInfo, uint64, string) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.infos, s.version, s.origin
}

// useCatalog installs the embedded catalog's types of the region when nothing was loaded yet.
// It reports whether it did.
func (s *typeSource) useCatalog() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.infos != nil || s.catalog == nil {
		return false
	}
	types := s.catalog.InstanceTypes(s.region)
	if types == nil {
		return false
	}
	infos := make([]typeInfo, 0, len(types))
	for _, t := range types {
		infos = append(infos, infoFromCatalog(t))
	}
	s.infos, s.origin = infos, TypeSourceCatalog
	s.version++
	return true
}

// refresh reads the region's instance types and their zone offerings from EC2. On failure the
// previous types stay (the catalog's when none were ever read).
func (s *typeSource) refresh(ctx context.Context, now time.Time) error {
	zones, err := describeOfferings(ctx, s.api)
	if err == nil {
		var infos []typeInfo
		infos, err = describeTypes(ctx, s.api, zones)
		if err == nil {
			s.mu.Lock()
			s.infos, s.origin, s.updated = infos, TypeSourceEC2, now
			s.version++
			s.mu.Unlock()
			return nil
		}
	}
	s.useCatalog()
	return err
}

// describeOfferings returns the zones each instance type is offered in.
func describeOfferings(ctx context.Context, api EC2API) (map[string][]string, error) {
	zones := map[string][]string{}
	pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(api, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		MaxResults:   aws.Int32(1000),
	})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe instance type offerings: %w", err)
		}
		for _, o := range out.InstanceTypeOfferings {
			t, z := string(o.InstanceType), aws.ToString(o.Location)
			if z != "" && !slices.Contains(zones[t], z) {
				zones[t] = append(zones[t], z)
			}
		}
	}
	return zones, nil
}

// describeTypes returns the HVM amd64 and arm64 instance types offered in some zone, sorted.
func describeTypes(ctx context.Context, api EC2API, zones map[string][]string) ([]typeInfo, error) {
	var infos []typeInfo
	pages := ec2.NewDescribeInstanceTypesPaginator(api, &ec2.DescribeInstanceTypesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("supported-virtualization-type"), Values: []string{"hvm"}},
			{Name: aws.String("processor-info.supported-architecture"), Values: []string{"x86_64", "arm64"}},
		},
		MaxResults: aws.Int32(100),
	})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe instance types: %w", err)
		}
		for _, t := range out.InstanceTypes {
			z := zones[string(t.InstanceType)]
			if len(z) == 0 {
				continue
			}
			if info, ok := infoFromEC2(t, z); ok {
				infos = append(infos, info)
			}
		}
	}
	slices.SortFunc(infos, func(a, b typeInfo) int { return strings.Compare(a.Name, b.Name) })
	return infos, nil
}

// classView is what of an EC2NodeClass (and its resolved status) the instance types depend on.
type classView struct {
	Name  string
	Shape nodeShape
	// Zones are the zones of the resolved subnets, sorted, with their IDs.
	Zones   []string
	ZoneIDs map[string]string
	// Subnets are the resolved subnets by zone, in status order.
	Subnets map[string][]string
	// AMIs are the resolved AMIs, in status order (the first compatible one is used).
	AMIs []amiChoice
	// NestedVirtualization keeps only types that support it.
	NestedVirtualization bool
}

// amiChoice is a resolved AMI with the requirements of the types it serves.
type amiChoice struct {
	ID           string
	Requirements requirements.Requirements
	raw          []corev1.NodeSelectorRequirement
}

// newClassView reads the class's spec and status.
func newClassView(nc *awsv1.EC2NodeClass, vmOverhead float64, reservedENIs int) (*classView, error) {
	v := &classView{
		Name: nc.Name,
		Shape: nodeShape{
			Family:                  nc.AMIFamily(),
			Kubelet:                 nc.Spec.Kubelet,
			BlockDeviceMappings:     nc.Spec.BlockDeviceMappings,
			InstanceStorePolicy:     nc.Spec.InstanceStorePolicy,
			NetworkInterfaces:       nc.Spec.NetworkInterfaces,
			VMMemoryOverheadPercent: vmOverhead,
			ReservedENIs:            reservedENIs,
		},
		ZoneIDs: map[string]string{},
		Subnets: map[string][]string{},
	}
	for _, s := range nc.Status.Subnets {
		if s.Zone == "" || s.ID == "" {
			continue
		}
		if _, ok := v.Subnets[s.Zone]; !ok {
			v.Zones = append(v.Zones, s.Zone)
		}
		v.Subnets[s.Zone] = append(v.Subnets[s.Zone], s.ID)
		if s.ZoneID != "" {
			v.ZoneIDs[s.Zone] = s.ZoneID
		}
	}
	slices.Sort(v.Zones)
	for i, a := range nc.Status.AMIs {
		reqs, err := requirements.FromNodeSelectorRequirements(a.Requirements...)
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: status.amis[%d].requirements: %w", nc.Name, i, err)
		}
		v.AMIs = append(v.AMIs, amiChoice{ID: a.ID, Requirements: reqs, raw: a.Requirements})
	}
	if c := nc.Spec.CPUOptions; c != nil && c.NestedVirtualization != nil && *c.NestedVirtualization == "enabled" {
		v.NestedVirtualization = true
	}
	return v, nil
}

// key identifies everything the built types depend on.
func (v *classView) key() (uint64, error) {
	amis := make([]any, len(v.AMIs))
	for i, a := range v.AMIs {
		amis[i] = []any{a.ID, a.raw}
	}
	// JSON rather than a struct hash: resource.Quantity keeps its value in unexported fields.
	return jsonHash([]any{v.Shape, v.Zones, v.ZoneIDs, v.Subnets, amis, v.NestedVirtualization})
}

// builtType is an instance type of a class, with what launching it needs.
type builtType struct {
	it   *cloudprovider.InstanceType
	info *typeInfo
	ami  string
}

// builtTypes are the instance types of one class view, valid for one version of the types and
// of the unavailable offerings.
type builtTypes struct {
	typesVersion, iceSeq uint64
	types                cloudprovider.InstanceTypes
	byName               map[string]*builtType
}

// typeBuilder builds and caches the instance types of class views.
type typeBuilder struct {
	source      *typeSource
	pricing     *Pricing
	unavailable *UnavailableOfferings
	region      string

	mu    sync.Mutex
	built map[uint64]*builtTypes
}

// get returns the instance types of the class view (shared; do not modify).
func (b *typeBuilder) get(v *classView) (*builtTypes, error) {
	key, err := v.key()
	if err != nil {
		return nil, fmt.Errorf("hash EC2NodeClass %s: %w", v.Name, err)
	}
	infos, version, _ := b.source.snapshot()
	seq := b.unavailable.SeqNum()
	b.mu.Lock()
	defer b.mu.Unlock()
	if have, ok := b.built[key]; ok && have.typesVersion == version && have.iceSeq == seq {
		return have, nil
	}
	out := &builtTypes{typesVersion: version, iceSeq: seq, byName: map[string]*builtType{}}
	for i := range infos {
		bt, err := b.build(v, &infos[i])
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: instance type %s: %w", v.Name, infos[i].Name, err)
		}
		if bt != nil {
			out.types = append(out.types, bt.it)
			out.byName[bt.it.Name] = bt
		}
	}
	if len(b.built) > 64 {
		clear(b.built) // class views come and go; never let stale ones pile up
	}
	b.built[key] = out
	return out, nil
}

// build returns the instance type for the class, or nil when the class cannot launch it (not
// offered in the class's zones, no AMI for it, nested virtualization missing).
func (b *typeBuilder) build(v *classView, info *typeInfo) (*builtType, error) {
	if v.NestedVirtualization && !info.NestedVirtualization {
		return nil, nil
	}
	var zones []string
	for _, z := range info.Zones {
		if _, ok := v.Subnets[z]; ok {
			zones = append(zones, z)
		}
	}
	if len(zones) == 0 {
		return nil, nil
	}
	labels := info.labels(osOf(v.Shape.Family))
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	reqs := requirements.New()
	for _, k := range keys {
		reqs.Add(requirements.In(k, labels[k]))
	}
	for _, k := range optionalLabelKeys {
		if _, ok := labels[k]; !ok {
			reqs.Add(requirements.DoesNotExist(k))
		}
	}
	reqs.Add(requirements.In(karpv1.LabelTopologyRegion, b.region))

	ami := ""
	if len(v.AMIs) > 0 {
		for _, a := range v.AMIs {
			if _, bad := reqs.FirstIncompatibility(a.Requirements); !bad {
				ami = a.ID
				break
			}
		}
		if ami == "" {
			return nil, nil
		}
	}

	capacityTypes := []string{karpv1.CapacityTypeOnDemand}
	if info.SpotSupported {
		capacityTypes = append(capacityTypes, karpv1.CapacityTypeSpot)
	}
	var offerings cloudprovider.Offerings
	var zoneIDs []string
	for _, z := range zones {
		subnetLeft := slices.ContainsFunc(v.Subnets[z], func(id string) bool { return !b.unavailable.IsSubnetUnavailable(id) })
		for _, ct := range capacityTypes {
			var price float64
			var priced bool
			if ct == karpv1.CapacityTypeSpot {
				price, priced = b.pricing.Spot(info.Name, z)
			} else {
				price, priced = b.pricing.OnDemand(info.Name)
			}
			o := cloudprovider.NewOffering(z, ct, price, priced && subnetLeft && !b.unavailable.IsUnavailable(info.Name, z, ct))
			if id := v.ZoneIDs[z]; id != "" {
				o.Requirements.Add(requirements.In(awsv1.LabelTopologyZoneID, id))
			}
			offerings = append(offerings, o)
		}
		if id := v.ZoneIDs[z]; id != "" {
			zoneIDs = append(zoneIDs, id)
		}
	}
	reqs.Add(
		requirements.In(karpv1.LabelTopologyZone, zones...),
		requirements.In(karpv1.CapacityTypeLabelKey, capacityTypes...),
	)
	if len(zoneIDs) > 0 {
		reqs.Add(requirements.In(awsv1.LabelTopologyZoneID, zoneIDs...))
	}
	capacity := v.Shape.capacity(info)
	overhead, err := v.Shape.overhead(info, capacity)
	if err != nil {
		return nil, err
	}
	return &builtType{
		it: &cloudprovider.InstanceType{
			Name:         info.Name,
			Requirements: reqs,
			Offerings:    offerings,
			Capacity:     capacity,
			Overhead:     overhead,
		},
		info: info,
		ami:  ami,
	}, nil
}
