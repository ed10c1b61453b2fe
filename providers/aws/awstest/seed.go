package awstest

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// DiscoveryTag is the tag key Seed puts, with the Env's ClusterName as value, on what a node
// class should select (as Karpenter's getting-started guide does).
const DiscoveryTag = "karpenter.sh/discovery"

// Zones are the availability zones Seed puts the private subnets in.
var Zones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// Env is what one Seed created. Every name carries ClusterName, so environments seeded on one
// Moto by different tests do not select each other's resources.
type Env struct {
	// ClusterName is unique per Seed; DiscoveryTag=ClusterName marks the selectable resources.
	ClusterName string
	VPCID       string
	// PrivateSubnets are in Zones, in that order, tagged DiscoveryTag, Name and
	// kubernetes.io/role/internal-elb=1.
	PrivateSubnets []Subnet
	// PublicSubnet is in Zones[0], tagged Name and kubernetes.io/role/elb=1 but not DiscoveryTag.
	PublicSubnet Subnet
	// NodeSecurityGroup ("<cluster>-nodes") is tagged DiscoveryTag and Name; ClusterSecurityGroup
	// ("<cluster>-cluster") DiscoveryTag and kubernetes.io/cluster/<cluster>=owned;
	// OtherSecurityGroup ("<cluster>-other") only Name.
	NodeSecurityGroup, ClusterSecurityGroup, OtherSecurityGroup SecurityGroup
	// RoleName is an IAM role EC2 may assume ("<cluster>-node"); RoleARN its ARN.
	RoleName, RoleARN string
	// InstanceProfileName is an existing instance profile holding RoleName ("<cluster>-profile").
	InstanceProfileName string
	// CustomAMIs are self-owned copies of the newest AL2023 AMIs, x86_64 then arm64, named
	// "<cluster>-custom-<arch>" and tagged DiscoveryTag.
	CustomAMIs []AMI
	// CustomAMIParameter is an SSM parameter ("/<cluster>/ami/x86_64") whose value is CustomAMIs[0].ID.
	CustomAMIParameter string
	// QueueName and QueueURL are an SQS queue ("<cluster>-interruption") for interruption events.
	QueueName, QueueURL string
	// OpenReservation is an active, open, default capacity reservation for m5.large in
	// Zones[0]; CapacityBlock a targeted capacity block for p5.48xlarge in Zones[1] ending in
	// 24h. Both are tagged DiscoveryTag.
	OpenReservation, CapacityBlock CapacityReservation
}

// Subnet is a seeded subnet.
type Subnet struct {
	ID, Zone, ZoneID, CIDR string
	Tags                   map[string]string
}

// SecurityGroup is a seeded security group.
type SecurityGroup struct {
	ID, Name string
	Tags     map[string]string
}

// AMI is a seeded, self-owned AMI.
type AMI struct {
	ID, Name, Arch string
	Tags           map[string]string
}

var seedSeq atomic.Int64

// Seed creates a realistic account for one cluster and returns what it created. It fails t on
// any error. Seeding takes well under a second.
func (m *Moto) Seed(ctx context.Context, t testing.TB) *Env {
	t.Helper()
	env, err := m.seed(ctx, clusterName(t.Name()))
	if err != nil {
		t.Fatalf("awstest: seed: %v", err)
	}
	return env
}

// SeedCluster is Seed for a TestMain, where there is no testing.TB: it seeds the account of the
// cluster named cluster (lower-case letters, digits and dashes; unique per Moto) and returns the
// error instead of failing a test.
func (m *Moto) SeedCluster(ctx context.Context, cluster string) (*Env, error) {
	if !clusterNamePattern.MatchString(cluster) {
		return nil, fmt.Errorf("awstest: seed: cluster name %q: use lower-case letters, digits and dashes", cluster)
	}
	env, err := m.seed(ctx, cluster)
	if err != nil {
		return nil, fmt.Errorf("awstest: seed cluster %s: %w", cluster, err)
	}
	return env, nil
}

var (
	nonName            = regexp.MustCompile(`[^a-z0-9]+`)
	clusterNamePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$`)
)

func clusterName(testName string) string {
	base := strings.Trim(nonName.ReplaceAllString(strings.ToLower(testName), "-"), "-")
	if len(base) > 24 {
		base = strings.Trim(base[:24], "-")
	}
	return fmt.Sprintf("%s-%d", base, seedSeq.Add(1))
}

func (m *Moto) seed(ctx context.Context, cluster string) (*Env, error) {
	ec2c := ec2.NewFromConfig(m.Config)
	env := &Env{ClusterName: cluster}
	discovery := map[string]string{DiscoveryTag: cluster}

	vpc, err := ec2c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16"),
		TagSpecifications: tagSpec(ec2types.ResourceTypeVpc, merge(discovery, map[string]string{"Name": cluster}))})
	if err != nil {
		return nil, fmt.Errorf("create VPC: %w", err)
	}
	env.VPCID = aws.ToString(vpc.Vpc.VpcId)

	createSubnet := func(zone, cidr string, tags map[string]string) (Subnet, error) {
		out, err := ec2c.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(cidr),
			AvailabilityZone: aws.String(zone), TagSpecifications: tagSpec(ec2types.ResourceTypeSubnet, tags)})
		if err != nil {
			return Subnet{}, fmt.Errorf("create subnet %s in %s: %w", cidr, zone, err)
		}
		return Subnet{ID: aws.ToString(out.Subnet.SubnetId), Zone: zone, ZoneID: aws.ToString(out.Subnet.AvailabilityZoneId), CIDR: cidr, Tags: tags}, nil
	}
	for i, zone := range Zones {
		s, err := createSubnet(zone, fmt.Sprintf("10.0.%d.0/24", i+1), merge(discovery, map[string]string{
			"Name": fmt.Sprintf("%s-private-%s", cluster, zone), "kubernetes.io/role/internal-elb": "1"}))
		if err != nil {
			return nil, err
		}
		env.PrivateSubnets = append(env.PrivateSubnets, s)
	}
	if env.PublicSubnet, err = createSubnet(Zones[0], "10.0.101.0/24", map[string]string{
		"Name": fmt.Sprintf("%s-public-%s", cluster, Zones[0]), "kubernetes.io/role/elb": "1"}); err != nil {
		return nil, err
	}

	createSG := func(name string, tags map[string]string) (SecurityGroup, error) {
		out, err := ec2c.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(name), VpcId: vpc.Vpc.VpcId,
			Description: aws.String("awstest " + name), TagSpecifications: tagSpec(ec2types.ResourceTypeSecurityGroup, tags)})
		if err != nil {
			return SecurityGroup{}, fmt.Errorf("create security group %s: %w", name, err)
		}
		return SecurityGroup{ID: aws.ToString(out.GroupId), Name: name, Tags: tags}, nil
	}
	if env.NodeSecurityGroup, err = createSG(cluster+"-nodes", merge(discovery, map[string]string{"Name": cluster + "-nodes"})); err != nil {
		return nil, err
	}
	if env.ClusterSecurityGroup, err = createSG(cluster+"-cluster", merge(discovery, map[string]string{"kubernetes.io/cluster/" + cluster: "owned"})); err != nil {
		return nil, err
	}
	if env.OtherSecurityGroup, err = createSG(cluster+"-other", map[string]string{"Name": cluster + "-other"}); err != nil {
		return nil, err
	}

	if err := m.seedIAM(ctx, env); err != nil {
		return nil, err
	}

	for _, arch := range []string{"x86_64", "arm64"} {
		src, ok := FindPublishedAMI("AL2023", PublishedKubernetesVersions[len(PublishedKubernetesVersions)-1], "", arch, "standard")
		if !ok {
			return nil, fmt.Errorf("no published AL2023 %s AMI to copy", arch)
		}
		name := fmt.Sprintf("%s-custom-%s", cluster, arch)
		out, err := ec2c.CopyImage(ctx, &ec2.CopyImageInput{SourceImageId: aws.String(src.ID), SourceRegion: aws.String(Region), Name: aws.String(name)})
		if err != nil {
			return nil, fmt.Errorf("copy AMI %s: %w", src.ID, err)
		}
		tags := merge(discovery, map[string]string{"Name": name})
		if _, err := ec2c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{aws.ToString(out.ImageId)}, Tags: ec2Tags(tags)}); err != nil {
			return nil, fmt.Errorf("tag AMI %s: %w", aws.ToString(out.ImageId), err)
		}
		env.CustomAMIs = append(env.CustomAMIs, AMI{ID: aws.ToString(out.ImageId), Name: name, Arch: arch, Tags: tags})
	}
	env.CustomAMIParameter = "/" + cluster + "/ami/x86_64"
	if _, err := ssm.NewFromConfig(m.Config).PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(env.CustomAMIParameter),
		Value: aws.String(env.CustomAMIs[0].ID), Type: ssmtypes.ParameterTypeString, DataType: aws.String("text")}); err != nil {
		return nil, fmt.Errorf("put SSM parameter %s: %w", env.CustomAMIParameter, err)
	}

	env.QueueName = cluster + "-interruption"
	q, err := sqs.NewFromConfig(m.Config).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(env.QueueName),
		Attributes: map[string]string{"MessageRetentionPeriod": "300"}})
	if err != nil {
		return nil, fmt.Errorf("create queue %s: %w", env.QueueName, err)
	}
	env.QueueURL = aws.ToString(q.QueueUrl)

	env.OpenReservation = m.AddCapacityReservation(CapacityReservation{InstanceType: "m5.large",
		AvailabilityZone: env.PrivateSubnets[0].Zone, AvailabilityZoneID: env.PrivateSubnets[0].ZoneID,
		TotalInstanceCount: 4, AvailableInstanceCount: 4, Tags: merge(discovery, map[string]string{"Name": cluster + "-odcr"})})
	end := time.Now().Add(24 * time.Hour).UTC().Truncate(time.Second)
	env.CapacityBlock = m.AddCapacityReservation(CapacityReservation{InstanceType: "p5.48xlarge",
		AvailabilityZone: env.PrivateSubnets[1].Zone, AvailabilityZoneID: env.PrivateSubnets[1].ZoneID,
		InstanceMatchCriteria: "targeted", ReservationType: "capacity-block", TotalInstanceCount: 2, AvailableInstanceCount: 2,
		EndDate: &end, Tags: merge(discovery, map[string]string{"Name": cluster + "-block"})})
	return env, nil
}

func (m *Moto) seedIAM(ctx context.Context, env *Env) error {
	iamc := iam.NewFromConfig(m.Config)
	env.RoleName = env.ClusterName + "-node"
	role, err := iamc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(env.RoleName),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	if err != nil {
		return fmt.Errorf("create role %s: %w", env.RoleName, err)
	}
	env.RoleARN = aws.ToString(role.Role.Arn)
	env.InstanceProfileName = env.ClusterName + "-profile"
	if _, err := iamc.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(env.InstanceProfileName)}); err != nil {
		return fmt.Errorf("create instance profile %s: %w", env.InstanceProfileName, err)
	}
	if _, err := iamc.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{
		InstanceProfileName: aws.String(env.InstanceProfileName), RoleName: aws.String(env.RoleName)}); err != nil {
		return fmt.Errorf("add role %s to instance profile %s: %w", env.RoleName, env.InstanceProfileName, err)
	}
	return nil
}

func merge(maps ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range maps {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

func ec2Tags(tags map[string]string) []ec2types.Tag {
	out := make([]ec2types.Tag, 0, len(tags))
	for k, v := range tags {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return out
}

func tagSpec(rt ec2types.ResourceType, tags map[string]string) []ec2types.TagSpecification {
	return []ec2types.TagSpecification{{ResourceType: rt, Tags: ec2Tags(tags)}}
}
