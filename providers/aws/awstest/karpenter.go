package awstest

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// KarpenterLaunch describes an instance as Karpenter v1 launches it, for tests of taking a cluster
// over from Karpenter.
type KarpenterLaunch struct {
	// ClusterName, NodePool and NodeClass name the cluster, the NodePool and the EC2NodeClass.
	ClusterName, NodePool, NodeClass string
	// InstanceType, Zone, SubnetID and ImageID place the instance; SecurityGroupIDs and
	// InstanceProfile go into its launch template.
	InstanceType, Zone, SubnetID, ImageID string
	SecurityGroupIDs                      []string
	InstanceProfile                       string
	// Tags are the EC2NodeClass's spec.tags.
	Tags map[string]string
}

// KarpenterInstance is what LaunchAsKarpenter created.
type KarpenterInstance struct {
	// InstanceID is the instance's ID, ProviderID the provider ID Karpenter writes in the
	// NodeClaim's status (aws:///<zone>/<id>).
	InstanceID, ProviderID string
	// LaunchTemplate is the name of its launch template (karpenter.k8s.aws/<hash>).
	LaunchTemplate string
}

// KarpenterTags are the tags Karpenter v1 launches instances, their volumes and launch templates
// with (utils.GetTags): spec.tags, then kubernetes.io/cluster/<cluster>=owned,
// karpenter.sh/nodepool, eks:eks-cluster-name and karpenter.k8s.aws/ec2nodeclass. The
// karpenter.sh/nodeclaim and Name tags only come after the Node registered.
func (k KarpenterLaunch) KarpenterTags() map[string]string {
	tags := maps.Clone(k.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags["kubernetes.io/cluster/"+k.ClusterName] = "owned"
	tags["karpenter.sh/nodepool"] = k.NodePool
	tags["eks:eks-cluster-name"] = k.ClusterName
	tags["karpenter.k8s.aws/ec2nodeclass"] = k.NodeClass
	return tags
}

// LaunchAsKarpenter creates the launch template (named karpenter.k8s.aws/<hash of its content>,
// tagged as Karpenter tags it) unless it exists, and launches one on-demand instance from it with
// an instant CreateFleet, as Karpenter does.
func LaunchAsKarpenter(ctx context.Context, ec2c *ec2.Client, k KarpenterLaunch) (KarpenterInstance, error) {
	tagMap := k.KarpenterTags()
	tags := ec2Tags(tagMap)
	h := fnv.New64a()
	fmt.Fprint(h, k.ClusterName, k.NodeClass, k.ImageID, k.SecurityGroupIDs, k.InstanceProfile, tagMap) // fmt prints maps sorted
	name := fmt.Sprintf("karpenter.k8s.aws/%d", h.Sum64())
	_, err := ec2c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:            aws.String(k.ImageID),
			SecurityGroupIds:   k.SecurityGroupIDs,
			IamInstanceProfile: &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(k.InstanceProfile)},
		},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}},
	})
	if err != nil && errorCodeOf(err) != "InvalidLaunchTemplateName.AlreadyExistsException" {
		return KarpenterInstance{}, fmt.Errorf("create launch template %s as Karpenter: %w", name, err)
	}
	out, err := ec2c.CreateFleet(ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{{
				InstanceType: ec2types.InstanceType(k.InstanceType), SubnetId: aws.String(k.SubnetID), AvailabilityZone: aws.String(k.Zone),
			}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand,
		},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: tags},
		},
	})
	if err != nil {
		return KarpenterInstance{}, fmt.Errorf("launch %s in %s as Karpenter: %w", k.InstanceType, k.Zone, err)
	}
	for _, i := range out.Instances {
		if len(i.InstanceIds) > 0 {
			id := i.InstanceIds[0]
			return KarpenterInstance{InstanceID: id, ProviderID: "aws:///" + k.Zone + "/" + id, LaunchTemplate: name}, nil
		}
	}
	return KarpenterInstance{}, fmt.Errorf("launch %s in %s as Karpenter: CreateFleet launched nothing (errors %v)", k.InstanceType, k.Zone, out.Errors)
}

// InstanceTags returns the tags of the instance.
func InstanceTags(ctx context.Context, ec2c *ec2.Client, id string) (map[string]string, error) {
	out, err := ec2c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return nil, fmt.Errorf("describe instance %s: %w", id, err)
	}
	for _, r := range out.Reservations {
		for _, i := range r.Instances {
			tags := map[string]string{}
			for _, t := range i.Tags {
				tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
			}
			return tags, nil
		}
	}
	return nil, fmt.Errorf("describe instance %s: not found", id)
}

// errorCodeOf returns the AWS error code of err, or "".
func errorCodeOf(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}
