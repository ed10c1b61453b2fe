package aws

import (
	"context"
	"fmt"
	"slices"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"
)

// IsDrifted reports, in this order: NodeClassDrift when the class's spec hash (annotation
// karpenter.k8s.aws/ec2nodeclass-hash, same hash version) differs from the one stamped at
// launch; AMIDrift when the NodeClaim's image is not an AMI the class resolves for the node's
// instance type; SecurityGroupDrift when the instance's security groups differ from the class's;
// SubnetDrift when its subnet is not among the class's. A class that is not Ready reports no
// drift (its status may be incomplete). It costs one DescribeInstances for the groups and subnet.
func (p *Provider) IsDrifted(ctx context.Context, nodeClaim *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	nc, err := p.readyNodeClass(ctx, nodeClaim.Spec.NodeClassRef, "nodeclaim "+nodeClaim.Name)
	if cloudprovider.IsNodeClassNotReady(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("check drift of nodeclaim %s: %w", nodeClaim.Name, err)
	}
	if reason := staticDrift(nodeClaim, nc); reason != "" {
		return reason, nil
	}
	if reason, err := amiDrift(nodeClaim, nc); err != nil || reason != "" {
		return reason, err
	}
	id, err := ParseProviderID(nodeClaim.Status.ProviderID)
	if err != nil {
		return "", nil
	}
	inst, err := p.driftInstances.get(ctx, id, p.describeInstance)
	if err != nil {
		return "", fmt.Errorf("check drift of nodeclaim %s: %w", nodeClaim.Name, err)
	}
	return networkDrift(inst, nc), nil
}

// staticDrift compares the class's spec hash with the NodeClaim's, under the same version.
func staticDrift(nodeClaim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass) cloudprovider.DriftReason {
	classHash, ok1 := nc.Annotations[awsv1.AnnotationEC2NodeClassHash]
	claimHash, ok2 := nodeClaim.Annotations[awsv1.AnnotationEC2NodeClassHash]
	if !ok1 || !ok2 || nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != nodeClaim.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] {
		return ""
	}
	if classHash != claimHash {
		return DriftReasonNodeClass
	}
	return ""
}

// amiDrift reports AMIDrift when the NodeClaim's image is not among the class's AMIs that serve
// its instance type (judged by the NodeClaim's labels).
func amiDrift(nodeClaim *karpv1.NodeClaim, nc *awsv1.EC2NodeClass) (cloudprovider.DriftReason, error) {
	if nodeClaim.Status.ImageID == "" {
		return "", nil
	}
	node := requirements.FromLabels(nodeClaim.Labels)
	for i, a := range nc.Status.AMIs {
		if a.ID != nodeClaim.Status.ImageID {
			continue
		}
		reqs, err := requirements.FromNodeSelectorRequirements(a.Requirements...)
		if err != nil {
			return "", fmt.Errorf("EC2NodeClass %s: status.amis[%d].requirements: %w", nc.Name, i, err)
		}
		if _, conflict := node.FirstConflict(reqs); !conflict {
			return "", nil
		}
	}
	return DriftReasonAMI, nil
}

// networkDrift compares the instance's security groups and subnet with the class's status.
func networkDrift(inst *instance, nc *awsv1.EC2NodeClass) cloudprovider.DriftReason {
	want := make([]string, 0, len(nc.Status.SecurityGroups))
	for _, sg := range nc.Status.SecurityGroups {
		want = append(want, sg.ID)
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(want, inst.SecurityGroupIDs) {
		return DriftReasonSecurityGroup
	}
	if !slices.ContainsFunc(nc.Status.Subnets, func(s awsv1.Subnet) bool { return s.ID == inst.SubnetID }) {
		return DriftReasonSubnet
	}
	return ""
}
