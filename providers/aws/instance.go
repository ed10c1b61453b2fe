package aws

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// liveStates are the instance states of an instance that still exists (or is going away).
var liveStates = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// instance is what the provider reads back about an EC2 instance.
type instance struct {
	ID, Type, Zone, SubnetID, ImageID, CapacityType, State string
	SecurityGroupIDs                                       []string
	Tags                                                   map[string]string
	LaunchTime                                             time.Time
}

func instanceFromEC2(i ec2types.Instance) *instance {
	inst := &instance{
		ID:           aws.ToString(i.InstanceId),
		Type:         string(i.InstanceType),
		SubnetID:     aws.ToString(i.SubnetId),
		ImageID:      aws.ToString(i.ImageId),
		CapacityType: karpv1.CapacityTypeOnDemand,
		LaunchTime:   aws.ToTime(i.LaunchTime),
		Tags:         map[string]string{},
	}
	if i.Placement != nil {
		inst.Zone = aws.ToString(i.Placement.AvailabilityZone)
	}
	if i.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		inst.CapacityType = karpv1.CapacityTypeSpot
	}
	if i.State != nil {
		inst.State = string(i.State.Name)
	}
	for _, g := range i.SecurityGroups {
		inst.SecurityGroupIDs = append(inst.SecurityGroupIDs, aws.ToString(g.GroupId))
	}
	if len(inst.SecurityGroupIDs) == 0 {
		// Instances launched with explicit interfaces report their groups there.
		for _, ni := range i.NetworkInterfaces {
			if ni.Attachment != nil && aws.ToInt32(ni.Attachment.DeviceIndex) != 0 {
				continue
			}
			for _, g := range ni.Groups {
				inst.SecurityGroupIDs = append(inst.SecurityGroupIDs, aws.ToString(g.GroupId))
			}
		}
	}
	slices.Sort(inst.SecurityGroupIDs)
	inst.SecurityGroupIDs = slices.Compact(inst.SecurityGroupIDs)
	for _, t := range i.Tags {
		inst.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return inst
}

// describeInstance returns the instance, or a *NodeClaimNotFoundError when it does not exist or
// is terminated.
func (p *Provider) describeInstance(ctx context.Context, id string) (*instance, error) {
	out, err := p.opts.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if hasCode(err, codeInstanceNotFound) {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s does not exist", id))
	}
	if err != nil {
		return nil, fmt.Errorf("describe instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			if aws.ToString(i.InstanceId) != id {
				continue
			}
			inst := instanceFromEC2(i)
			if !slices.Contains(liveStates, inst.State) {
				return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is %s", id, inst.State))
			}
			return inst, nil
		}
	}
	return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s does not exist", id))
}

// Get returns the NodeClaim of the instance with the provider ID (one DescribeInstances), or a
// *NodeClaimNotFoundError when it does not exist or is terminated.
func (p *Provider) Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error) {
	id, err := ParseProviderID(providerID)
	if err != nil {
		return nil, cloudprovider.NewNodeClaimNotFoundError(err)
	}
	inst, err := p.describeInstance(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get instance %s: %w", providerID, err)
	}
	return p.nodeClaimFromInstance(ctx, inst, map[string]*classTypes{}), nil
}

// List returns a NodeClaim for every instance of the cluster the provider launched and that is
// not terminated: instances tagged kubernetes.io/cluster/<cluster>=owned and karpenter.sh/nodepool
// (DescribeInstances, paginated), ordered by provider ID. Karpenter launches with the same tags,
// so the instances Karpenter left in the cluster are listed too: garbage collection keeps those a
// NodeClaim names and terminates the others, as it does Joiner's own, and never an instance of
// another cluster.
func (p *Provider) List(ctx context.Context) ([]*karpv1.NodeClaim, error) {
	pages := ec2.NewDescribeInstancesPaginator(p.opts.EC2, &ec2.DescribeInstancesInput{
		Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + awsv1.TagKubernetesClusterPrefix + p.opts.ClusterName), Values: []string{"owned"}},
			{Name: aws.String("tag-key"), Values: []string{awsv1.TagNodePool}},
			{Name: aws.String("instance-state-name"), Values: liveStates},
		},
		MaxResults: aws.Int32(1000),
	})
	classes := map[string]*classTypes{}
	var out []*karpv1.NodeClaim
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list instances of cluster %s: %w", p.opts.ClusterName, err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				inst := instanceFromEC2(i)
				if slices.Contains(liveStates, inst.State) {
					out = append(out, p.nodeClaimFromInstance(ctx, inst, classes))
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b *karpv1.NodeClaim) int { return cmp.Compare(a.Status.ProviderID, b.Status.ProviderID) })
	return out, nil
}

// Delete terminates the NodeClaim's instance with one TerminateInstances. It returns nil while
// the instance is going away and a *NodeClaimNotFoundError once it is terminated or unknown.
func (p *Provider) Delete(ctx context.Context, nodeClaim *karpv1.NodeClaim) error {
	id, err := ParseProviderID(nodeClaim.Status.ProviderID)
	if err != nil {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("delete nodeclaim %s: %w", nodeClaim.Name, err))
	}
	out, err := p.opts.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})
	if hasCode(err, codeInstanceNotFound) {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s of nodeclaim %s does not exist", id, nodeClaim.Name))
	}
	if err != nil {
		return fmt.Errorf("terminate instance %s of nodeclaim %s: %w", id, nodeClaim.Name, err)
	}
	for _, c := range out.TerminatingInstances {
		if aws.ToString(c.InstanceId) == id && c.PreviousState != nil && c.PreviousState.Name == ec2types.InstanceStateNameTerminated {
			return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s of nodeclaim %s is terminated", id, nodeClaim.Name))
		}
	}
	p.log.Info("terminating instance", "nodeclaim", nodeClaim.Name, "instance", id)
	return nil
}

// classTypes caches, within one Get or List, the instance types of the classes instances name.
type classTypes struct {
	view  *classView
	built *builtTypes
}

// nodeClaimFromInstance describes an instance as a NodeClaim: its name (the karpenter.sh/nodeclaim
// tag), labels (type, zone, capacity type, NodePool, EC2NodeClass and the type's labels), launch
// time, provider ID, image, and capacity when its EC2NodeClass still builds the type. Instances
// going away carry a deletion timestamp.
func (p *Provider) nodeClaimFromInstance(ctx context.Context, inst *instance, classes map[string]*classTypes) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{}
	nc.Name = inst.Tags[awsv1.TagNodeClaim]
	nc.CreationTimestamp = metav1.NewTime(inst.LaunchTime)
	labels := map[string]string{}
	className := inst.Tags[awsv1.TagNodeClass]
	if className != "" {
		ct, ok := classes[className]
		if !ok {
			ct = &classTypes{}
			class := &awsv1.EC2NodeClass{}
			if err := p.kube.Get(ctx, types.NamespacedName{Name: className}, class); err == nil {
				if view, built, err := p.instanceTypesOf(class); err == nil {
					ct.view, ct.built = view, built
				}
			}
			classes[className] = ct
		}
		if ct.built != nil {
			if bt, ok := ct.built.byName[inst.Type]; ok {
				maps.Copy(labels, bt.it.Requirements.Labels())
				nc.Status.Capacity = bt.it.Capacity.DeepCopy()
				nc.Status.Allocatable = bt.it.Allocatable().DeepCopy()
			}
			if zid := ct.view.ZoneIDs[inst.Zone]; zid != "" {
				labels[awsv1.LabelTopologyZoneID] = zid
			}
		}
		labels[awsv1.LabelNodeClass] = className
	}
	labels[karpv1.LabelInstanceType] = inst.Type
	labels[karpv1.LabelTopologyZone] = inst.Zone
	labels[karpv1.LabelTopologyRegion] = p.opts.Region
	labels[karpv1.CapacityTypeLabelKey] = inst.CapacityType
	if np := inst.Tags[awsv1.TagNodePool]; np != "" {
		labels[karpv1.NodePoolLabelKey] = np
	}
	nc.Labels = labels
	if inst.State == string(ec2types.InstanceStateNameShuttingDown) || inst.State == string(ec2types.InstanceStateNameTerminated) {
		now := metav1.NewTime(p.clock.Now())
		nc.DeletionTimestamp = &now
	}
	nc.Status.ProviderID = ProviderID(inst.Zone, inst.ID)
	nc.Status.ImageID = inst.ImageID
	return nc
}
