package aws

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/aws/nodeclass"
	"github.com/joiner-dev/joiner/requirements"
)

// Reasons of the *cloudprovider.CreateError of a failed launch.
const (
	// ReasonLaunchTemplateFailed means the launch template could not be created.
	ReasonLaunchTemplateFailed = "LaunchTemplateCreationFailed"
	// ReasonFleetFailed means CreateFleet failed for a reason other than capacity.
	ReasonFleetFailed = "CreateFleetFailed"
	// ReasonUserDataFailed means the user data could not be rendered from the class.
	ReasonUserDataFailed = "UserDataInvalid"
)

// fleetOption is one instance type a launch may use, with the offerings it may use.
type fleetOption struct {
	bt     *builtType
	offers []*cloudprovider.Offering // available, compatible, of the chosen capacity type
	price  float64                   // of the cheapest offer
}

// Create launches an instance for the NodeClaim with one CreateFleet (type instant): among the
// instance types its requirements allow and its requests fit, up to 60 of the cheapest, each in
// every allowed zone through one subnet of the EC2NodeClass's status, spot
// (price-capacity-optimized) when the requirements allow spot and some spot offering is
// available, else on-demand (lowest-price). Per-override fleet errors mark offerings unavailable
// for a few minutes; when no instance was launched it returns an *InsufficientCapacityError if
// capacity was the cause. It returns a *NodeClassNotReadyError when the class is not Ready.
func (p *Provider) Create(ctx context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	nc, err := p.readyNodeClass(ctx, nodeClaim.Spec.NodeClassRef, "nodeclaim "+nodeClaim.Name)
	if err != nil {
		return nil, fmt.Errorf("launch nodeclaim %s: %w", nodeClaim.Name, err)
	}
	reqs, err := requirements.FromNodeSelectorRequirementsWithMinValues(nodeClaim.Spec.Requirements...)
	if err != nil {
		return nil, fmt.Errorf("launch nodeclaim %s: spec.requirements: %w", nodeClaim.Name, err)
	}
	view, built, err := p.instanceTypesOf(nc)
	if err != nil {
		return nil, fmt.Errorf("launch nodeclaim %s: %w", nodeClaim.Name, err)
	}
	capacityType, options, err := p.fleetOptions(built, reqs, nodeClaim.Spec.Resources.Requests)
	if err != nil {
		return nil, fmt.Errorf("launch nodeclaim %s: %w", nodeClaim.Name, err)
	}
	for attempt := 0; ; attempt++ {
		out, err := p.launch(ctx, nodeClaim, nc, view, capacityType, options, []uint64{built.typesVersion, built.iceSeq, uint64(attempt)})
		if errors.Is(err, errLaunchTemplateGone) {
			if attempt == 0 {
				continue // EC2 lost a template this process had created: create it again, once
			}
			err = cloudprovider.NewCreateError(err, ReasonLaunchTemplateFailed, "CreateFleet did not find the launch template just created")
		}
		if err != nil {
			return nil, fmt.Errorf("launch nodeclaim %s: %w", nodeClaim.Name, err)
		}
		return out, nil
	}
}

// fleetOptions chooses the capacity type and the instance types (cheapest first, at most
// MaxInstanceTypes, widened for minValues) of a launch.
func (p *Provider) fleetOptions(built *builtTypes, reqs requirements.Requirements, requests corev1.ResourceList) (string, []fleetOption, error) {
	byCapacityType := map[string][]fleetOption{}
	for _, it := range built.types {
		if _, conflict := reqs.FirstConflict(it.Requirements); conflict || !it.Fits(requests) {
			continue
		}
		offers := map[string][]*cloudprovider.Offering{}
		for _, o := range it.Offerings {
			if o.Available && o.CompatibleWith(reqs) {
				offers[o.CapacityType()] = append(offers[o.CapacityType()], o)
			}
		}
		for ct, os := range offers {
			cheapest := slices.MinFunc(os, func(a, b *cloudprovider.Offering) int { return cmp.Compare(a.Price, b.Price) })
			byCapacityType[ct] = append(byCapacityType[ct], fleetOption{bt: built.byName[it.Name], offers: os, price: cheapest.Price})
		}
	}
	// Spot when the requirements allow it and it is available, else on-demand; a capacity type
	// whose types cannot meet minValues gives way to the next.
	var minValuesErr error
	for _, ct := range []string{karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand} {
		options := byCapacityType[ct]
		if len(options) == 0 {
			continue
		}
		slices.SortStableFunc(options, func(a, b fleetOption) int {
			return cmp.Or(cmp.Compare(a.price, b.price), cmp.Compare(a.bt.it.Name, b.bt.it.Name))
		})
		types := make(cloudprovider.InstanceTypes, len(options))
		byName := make(map[string]fleetOption, len(options))
		for i, o := range options {
			types[i] = o.bt.it
			byName[o.bt.it.Name] = o
		}
		kept, err := types.Truncate(reqs, p.opts.MaxInstanceTypes)
		if err != nil {
			minValuesErr = fmt.Errorf("%s: %w", ct, err)
			continue
		}
		chosen := make([]fleetOption, len(kept))
		for i, it := range kept {
			chosen[i] = byName[it.Name]
		}
		return ct, chosen, nil
	}
	if minValuesErr != nil {
		return "", nil, cloudprovider.NewInsufficientCapacityError("", "", "", minValuesErr)
	}
	return "", nil, cloudprovider.NewInsufficientCapacityError("", "", "", fmt.Errorf(
		"no available offering satisfies requirements [%s] with requests %s (offerings that recently ran out of capacity stay unavailable for %s)",
		reqs, formatResources(requests), p.unavailable.ttl))
}

// errLaunchTemplateGone means CreateFleet did not find a launch template this process created.
var errLaunchTemplateGone = errors.New("launch template not found")

// launch runs one CreateFleet for the options and returns the launched NodeClaim.
func (p *Provider) launch(ctx context.Context, nodeClaim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass, view *classView,
	capacityType string, options []fleetOption, tokenSalt []uint64) (*karpv1.NodeClaim, error) {
	tags := p.instanceTags(nodeClaim, nc)
	configs, templateNames, err := p.launchTemplateConfigs(ctx, nodeClaim, nc, view, capacityType, options)
	if err != nil {
		return nil, err
	}
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(capacityType),
		},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: ec2Tags(tags)},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: ec2Tags(tags)},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: ec2Tags(tags)},
		},
		Context: nc.Spec.Context,
	}
	if capacityType == karpv1.CapacityTypeSpot {
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	if token, err := jsonHash([]any{string(nodeClaim.UID), in.LaunchTemplateConfigs, capacityType, tokenSalt}); err == nil && nodeClaim.UID != "" {
		// Same NodeClaim, same request, same view of capacity: a retry after a lost response
		// launches nothing twice. Any change (an offering refused or back, new types) is a new
		// token, so EC2 does not replay an old refusal.
		in.ClientToken = aws.String(string(nodeClaim.UID) + "-" + strconv.FormatUint(token, 36))
	}
	out, err := p.opts.EC2.CreateFleet(ctx, in)
	if err != nil {
		if hasCode(err, codeLaunchTemplateNotFound, codeLaunchTemplateIDNotFnd) {
			p.forgetTemplates(templateNames)
			return nil, errLaunchTemplateGone
		}
		if IsCapacityCode(errorCode(err)) {
			return nil, cloudprovider.NewInsufficientCapacityError("", "", capacityType, err)
		}
		return nil, cloudprovider.NewCreateError(err, ReasonFleetFailed, "CreateFleet failed")
	}
	fleetErrs := ParseFleetErrors(out.Errors, capacityType, view.zoneOfSubnet)
	p.unavailable.Record(fleetErrs)
	for _, fi := range out.Instances {
		if len(fi.InstanceIds) == 0 {
			continue
		}
		return p.launched(nodeClaim, nc, view, capacityType, options, fi)
	}
	for _, e := range fleetErrs {
		if e.Code == codeLaunchTemplateNotFound || e.Code == codeLaunchTemplateIDNotFnd {
			p.forgetTemplates(templateNames)
			return nil, errLaunchTemplateGone
		}
	}
	return nil, p.fleetFailure(capacityType, options, fleetErrs)
}

// fleetFailure explains a fleet that launched nothing: an *InsufficientCapacityError naming the
// cheapest refused offering when capacity was the cause (or EC2 said nothing), else a
// *CreateError with EC2's codes.
func (p *Provider) fleetFailure(capacityType string, options []fleetOption, errs []FleetError) error {
	var capacityErrs []FleetError
	for _, e := range errs {
		if IsCapacityCode(e.Code) {
			capacityErrs = append(capacityErrs, e)
		}
	}
	if len(errs) == 0 || len(capacityErrs) > 0 {
		name, zone := "", ""
		if len(options) > 0 {
			name = options[0].bt.it.Name
			zone = slices.MinFunc(options[0].offers, func(a, b *cloudprovider.Offering) int { return cmp.Compare(a.Price, b.Price) }).Zone()
		}
		for _, e := range capacityErrs {
			if e.InstanceType == name {
				zone = e.Zone
				break
			}
		}
		cause := errors.New("CreateFleet launched no instance and reported no error")
		if len(capacityErrs) > 0 {
			cause = fmt.Errorf("CreateFleet launched no instance: %s (first: %w)", summarizeFleetErrors(capacityErrs), capacityErrs[0])
		}
		return cloudprovider.NewInsufficientCapacityError(name, zone, capacityType, cause)
	}
	return cloudprovider.NewCreateError(errs[0], ReasonFleetFailed,
		fmt.Sprintf("CreateFleet launched no instance: %s", summarizeFleetErrors(errs)))
}

func (p *Provider) forgetTemplates(names []string) {
	for _, n := range names {
		p.templates.forget(n)
	}
}

// zoneOfSubnet returns the zone of one of the class's subnets, or "".
func (v *classView) zoneOfSubnet(id string) string {
	for z, ids := range v.Subnets {
		if slices.Contains(ids, id) {
			return z
		}
	}
	return ""
}

// instanceTags returns the tags of the instance, its volumes and the fleet: the class's tags,
// then the ones the provider owns (cluster, NodePool, NodeClaim, EC2NodeClass).
func (p *Provider) instanceTags(nodeClaim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass) map[string]string {
	tags := maps.Clone(nc.Spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	maps.Copy(tags, p.clusterTags())
	tags[awsv1.TagNodePool] = nodeClaim.Labels[karpv1.NodePoolLabelKey]
	tags[awsv1.TagNodeClaim] = nodeClaim.Name
	tags[awsv1.TagNodeClass] = nc.Name
	return tags
}

// clusterTags are the tags that mark a resource as this cluster's.
func (p *Provider) clusterTags() map[string]string {
	return map[string]string{
		awsv1.TagKubernetesClusterPrefix + p.opts.ClusterName: "owned",
		awsv1.TagEKSClusterName:                               p.opts.ClusterName,
	}
}

// launchTemplateConfigs builds one CreateFleet launch-template configuration per AMI the
// options use, creating the templates when needed, with one override per instance type and
// zone (through the first subnet of the zone not out of addresses).
func (p *Provider) launchTemplateConfigs(ctx context.Context, nodeClaim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass, view *classView,
	capacityType string, options []fleetOption) ([]ec2types.FleetLaunchTemplateConfigRequest, []string, error) {
	overrides := map[string][]ec2types.FleetLaunchTemplateOverridesRequest{}
	var amis []string
	for _, o := range options {
		for _, off := range o.offers {
			zone := off.Zone()
			subnet := ""
			for _, id := range view.Subnets[zone] {
				if !p.unavailable.IsSubnetUnavailable(id) {
					subnet = id
					break
				}
			}
			if subnet == "" {
				continue
			}
			if _, ok := overrides[o.bt.ami]; !ok {
				amis = append(amis, o.bt.ami)
			}
			overrides[o.bt.ami] = append(overrides[o.bt.ami], ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType:     ec2types.InstanceType(o.bt.it.Name),
				SubnetId:         aws.String(subnet),
				AvailabilityZone: aws.String(zone),
				Priority:         aws.Float64(math.Round(off.Price*1e6) / 1e6),
			})
		}
	}
	if len(amis) == 0 {
		return nil, nil, cloudprovider.NewInsufficientCapacityError("", "", capacityType, errors.New("every subnet of the allowed zones is out of addresses"))
	}
	family := nc.AMIFamily()
	ci := p.clusterInfo(ctx)
	if err := ci.requireFor(family, p.opts.ClusterName); err != nil {
		return nil, nil, cloudprovider.NewCreateError(err, ReasonLaunchTemplateFailed, "what nodes need to join the cluster is unknown")
	}
	userData, err := renderUserData(family, bootstrap{
		ClusterName: p.opts.ClusterName, Endpoint: ci.endpoint, CABundle: ci.caBundle, ServiceCIDR: ci.serviceCIDR,
		Kubelet: nc.Spec.Kubelet, Labels: nodeClaim.Labels, Taints: cloudprovider.RegistrationTaints(nodeClaim),
		InstanceStorePolicy: nc.Spec.InstanceStorePolicy, UserData: nc.Spec.UserData,
	})
	if err != nil {
		return nil, nil, cloudprovider.NewCreateError(err, ReasonUserDataFailed, fmt.Sprintf("render the user data of EC2NodeClass %s", nc.Name))
	}
	sgs := make([]string, 0, len(nc.Status.SecurityGroups))
	for _, sg := range nc.Status.SecurityGroups {
		sgs = append(sgs, sg.ID)
	}
	slices.Sort(sgs)
	bdms := nc.Spec.BlockDeviceMappings
	if len(bdms) == 0 {
		bdms = defaultBlockDevices(family)
	}
	templateTags := maps.Clone(nc.Spec.Tags)
	if templateTags == nil {
		templateTags = map[string]string{}
	}
	maps.Copy(templateTags, p.clusterTags())
	templateTags[awsv1.TagNodeClass] = nc.Name
	// Overrides cheapest first, and the template whose cheapest override is cheapest first: EC2
	// chooses by price and capacity anyway, and emulators that take the first override launch the
	// cheapest.
	for _, ami := range amis {
		slices.SortStableFunc(overrides[ami], func(a, b ec2types.FleetLaunchTemplateOverridesRequest) int {
			return cmp.Compare(aws.ToFloat64(a.Priority), aws.ToFloat64(b.Priority))
		})
	}
	slices.SortStableFunc(amis, func(a, b string) int {
		return cmp.Compare(aws.ToFloat64(overrides[a][0].Priority), aws.ToFloat64(overrides[b][0].Priority))
	})
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	var names []string
	for _, ami := range amis {
		cfg := &launchTemplateConfig{
			ClusterName:         p.opts.ClusterName,
			NodeClass:           nc.Name,
			ImageID:             ami,
			SecurityGroupIDs:    sgs,
			UserData:            encodeUserData(userData),
			InstanceProfile:     nc.Status.InstanceProfile,
			BlockDeviceMappings: bdms,
			MetadataOptions:     metadataDefaults(nc.Spec.MetadataOptions),
			DetailedMonitoring:  aws.ToBool(nc.Spec.DetailedMonitoring),
			AssociatePublicIP:   nc.Spec.AssociatePublicIPAddress,
			NetworkInterfaces:   nc.Spec.NetworkInterfaces,
			ConnectionTracking:  nc.Spec.ConnectionTracking,
			IPPrefixCount:       nc.Spec.IPPrefixCount,
			Tags:                templateTags,
		}
		name, err := p.templates.ensure(ctx, cfg)
		if err != nil {
			return nil, nil, cloudprovider.NewCreateError(err, ReasonLaunchTemplateFailed, fmt.Sprintf("create the launch template of EC2NodeClass %s", nc.Name))
		}
		names = append(names, name)
		configs = append(configs, ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")},
			Overrides:                   overrides[ami],
		})
	}
	return configs, names, nil
}

// launched returns the NodeClaim of the instance the fleet launched.
func (p *Provider) launched(nodeClaim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass, view *classView, fleetCapacityType string,
	options []fleetOption, fi ec2types.CreateFleetInstance) (*karpv1.NodeClaim, error) {
	id := fi.InstanceIds[0]
	typeName := string(fi.InstanceType)
	zone := aws.ToString(fi.AvailabilityZone)
	if lto := fi.LaunchTemplateAndOverrides; lto != nil && lto.Overrides != nil {
		if typeName == "" {
			typeName = string(lto.Overrides.InstanceType)
		}
		if zone == "" {
			zone = aws.ToString(lto.Overrides.AvailabilityZone)
		}
		if zone == "" {
			zone = view.zoneOfSubnet(aws.ToString(lto.Overrides.SubnetId))
		}
	}
	capacityType := fleetCapacityType
	switch fi.Lifecycle {
	case ec2types.InstanceLifecycleSpot:
		capacityType = karpv1.CapacityTypeSpot
	case ec2types.InstanceLifecycleOnDemand:
		capacityType = karpv1.CapacityTypeOnDemand
	}
	var bt *builtType
	for _, o := range options {
		if o.bt.it.Name == typeName {
			bt = o.bt
		}
	}
	if bt == nil {
		return nil, fmt.Errorf("CreateFleet launched instance %s of type %q in zone %q, which the request did not offer", id, typeName, zone)
	}
	labels := map[string]string{}
	reqs, err := requirements.FromNodeSelectorRequirementsWithMinValues(nodeClaim.Spec.Requirements...)
	if err == nil {
		maps.Copy(labels, reqs.Labels())
	}
	maps.Copy(labels, nodeClaim.Labels)
	maps.Copy(labels, bt.it.Requirements.Labels())
	labels[karpv1.LabelTopologyZone] = zone
	labels[karpv1.CapacityTypeLabelKey] = capacityType
	labels[karpv1.LabelTopologyRegion] = p.opts.Region
	if zid := view.ZoneIDs[zone]; zid != "" {
		labels[awsv1.LabelTopologyZoneID] = zid
	}
	labels[awsv1.LabelNodeClass] = nc.Name

	out := nodeClaim.DeepCopy()
	out.Labels = labels
	// The hash of the spec the instance was launched from, whether or not the class's annotation
	// has caught up with that spec yet.
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[awsv1.AnnotationEC2NodeClassHash] = nodeclass.Hash(nc)
	out.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = nodeclass.HashVersion
	out.Status.ProviderID = ProviderID(zone, id)
	out.Status.ImageID = bt.ami
	out.Status.Capacity = bt.it.Capacity.DeepCopy()
	out.Status.Allocatable = bt.it.Allocatable().DeepCopy()
	p.log.Info("launched instance", "nodeclaim", nodeClaim.Name, "instance", id, "instanceType", typeName, "zone", zone,
		"capacityType", capacityType, "image", bt.ami)
	return out, nil
}

// formatResources prints a resource list in name order, as "cpu=2, memory=1Gi".
func formatResources(l corev1.ResourceList) string {
	if len(l) == 0 {
		return "none"
	}
	keys := slices.Sorted(maps.Keys(l))
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += ", "
		}
		q := l[k]
		out += string(k) + "=" + q.String()
	}
	return out
}
