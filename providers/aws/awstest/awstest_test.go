package awstest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
)

// TestMotoAndSeed starts one Moto, seeds it twice and checks, through plain SDK clients, that
// what Seed reports exists, that the front's additions answer in the services' wire formats,
// and that two seeded environments do not select each other's resources.
func TestMotoAndSeed(t *testing.T) {
	ctx := context.Background()
	m := Start(t)
	env := m.Seed(ctx, t)
	other := m.Seed(ctx, t)
	if env.ClusterName == other.ClusterName {
		t.Fatalf("two seeds share the cluster name %s", env.ClusterName)
	}
	ec2c := ec2.NewFromConfig(m.Config)

	t.Run("seed a named cluster", func(t *testing.T) {
		named, err := m.SeedCluster(ctx, "e2e-named")
		if err != nil || named.ClusterName != "e2e-named" || named.QueueName != "e2e-named-interruption" || len(named.PrivateSubnets) != len(Zones) {
			t.Fatalf("SeedCluster = %+v, %v", named, err)
		}
		for _, bad := range []string{"", "E2E", "e2e_named", "-e2e", "e2e-"} {
			if _, err := m.SeedCluster(ctx, bad); err == nil {
				t.Errorf("SeedCluster(%q) succeeded", bad)
			}
		}
	})

	t.Run("subnets by discovery tag", func(t *testing.T) {
		out, err := ec2c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + DiscoveryTag), Values: []string{env.ClusterName}}}})
		if err != nil {
			t.Fatal(err)
		}
		var zones []string
		for _, s := range out.Subnets {
			zones = append(zones, aws.ToString(s.AvailabilityZone))
			if aws.ToString(s.AvailabilityZoneId) == "" {
				t.Errorf("subnet %s has no zone ID", aws.ToString(s.SubnetId))
			}
		}
		slices.Sort(zones)
		if !slices.Equal(zones, Zones) {
			t.Errorf("zones of discovered subnets = %v, want %v", zones, Zones)
		}
	})

	t.Run("security groups by name and tag", func(t *testing.T) {
		out, err := ec2c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{Filters: []ec2types.Filter{
			{Name: aws.String("tag:" + DiscoveryTag), Values: []string{env.ClusterName}}}})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, g := range out.SecurityGroups {
			ids = append(ids, aws.ToString(g.GroupId))
		}
		slices.Sort(ids)
		want := []string{env.NodeSecurityGroup.ID, env.ClusterSecurityGroup.ID}
		slices.Sort(want)
		if !slices.Equal(ids, want) {
			t.Errorf("discovered groups = %v, want %v", ids, want)
		}
	})

	t.Run("published and custom AMIs", func(t *testing.T) {
		out, err := ec2c.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"amazon"},
			Filters: []ec2types.Filter{{Name: aws.String("name"), Values: []string{"amazon-eks-node-al2023-*-standard-1.36-*"}}}})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Images) != 4 { // 2 architectures x 2 releases
			t.Errorf("found %d AL2023 standard 1.36 AMIs owned by amazon, want 4", len(out.Images))
		}
		for _, img := range out.Images {
			if aws.ToString(img.CreationDate) == "" || img.Architecture == "" {
				t.Errorf("AMI %s lacks creation date or architecture: %+v", aws.ToString(img.ImageId), img)
			}
		}
		self, err := ec2c.DescribeImages(ctx, &ec2.DescribeImagesInput{Owners: []string{"self"},
			Filters: []ec2types.Filter{{Name: aws.String("tag:" + DiscoveryTag), Values: []string{env.ClusterName}}}})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, img := range self.Images {
			got[aws.ToString(img.ImageId)] = string(img.Architecture)
		}
		for _, a := range env.CustomAMIs {
			if got[a.ID] != a.Arch {
				t.Errorf("custom AMI %s: architecture %q, want %q (found %v)", a.ID, got[a.ID], a.Arch, got)
			}
		}
	})

	t.Run("published SSM parameters", func(t *testing.T) {
		ssmc := ssm.NewFromConfig(m.Config)
		al2023, _ := FindPublishedAMI("AL2023", "1.36", "", "x86_64", "standard")
		for _, tc := range []struct {
			name, want, wantErr string
		}{
			{name: "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id", want: al2023.ID},
			{name: "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.36-v20260901/image_id", want: al2023.ID},
			{name: "/aws/service/eks/optimized-ami/1.36/amazon-linux-2/recommended/image_id", wantErr: "ParameterNotFound"},
			{name: "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-gpu/recommended/image_id", want: mustPublished(t, "AL2", "1.32", "x86_64", "nvidia")},
			{name: "/aws/service/bottlerocket/aws-k8s-1.35-nvidia/arm64/latest/image_id", want: mustPublished(t, "Bottlerocket", "1.35", "arm64", "nvidia")},
			{name: "/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.36/image_id", want: mustPublished(t, "Windows2022", "1.36", "x86_64", "standard")},
			{name: env.CustomAMIParameter, want: env.CustomAMIs[0].ID}, // served by moto itself
		} {
			out, err := ssmc.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(tc.name)})
			if tc.wantErr != "" {
				if code := errorCode(err); code != tc.wantErr {
					t.Errorf("GetParameter(%s): error %v, want %s", tc.name, err, tc.wantErr)
				}
				continue
			}
			if err != nil {
				t.Errorf("GetParameter(%s): %v", tc.name, err)
				continue
			}
			if got := aws.ToString(out.Parameter.Value); got != tc.want {
				t.Errorf("GetParameter(%s) = %s, want %s", tc.name, got, tc.want)
			}
		}
		recommended := "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/arm64/standard/recommended/image_id"
		m.SetParameter(recommended, "ami-0123456789abcdef0")
		if out, err := ssmc.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(recommended)}); err != nil || aws.ToString(out.Parameter.Value) != "ami-0123456789abcdef0" {
			t.Errorf("after SetParameter: %v, %v", out, err)
		}
		m.DeleteParameter(recommended)
		if _, err := ssmc.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(recommended)}); errorCode(err) != "ParameterNotFound" {
			t.Errorf("after DeleteParameter: %v, want ParameterNotFound", err)
		}
		batch, err := ssmc.GetParameters(ctx, &ssm.GetParametersInput{Names: []string{
			"/aws/service/bottlerocket/aws-k8s-1.36/x86_64/latest/image_id", "/aws/service/bottlerocket/aws-k8s-9.99/x86_64/latest/image_id"}})
		if err != nil || len(batch.Parameters) != 1 || len(batch.InvalidParameters) != 1 {
			t.Errorf("GetParameters = %+v, %v; want one found, one invalid", batch, err)
		}
	})

	t.Run("capacity reservations", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			in   *ec2.DescribeCapacityReservationsInput
			want []string
			code string
		}{
			{name: "by tag", in: &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{
				{Name: aws.String("tag:" + DiscoveryTag), Values: []string{env.ClusterName}}}},
				want: []string{env.OpenReservation.ID, env.CapacityBlock.ID}},
			{name: "by tag and match criteria", in: &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{
				{Name: aws.String("tag:" + DiscoveryTag), Values: []string{env.ClusterName}},
				{Name: aws.String("instance-match-criteria"), Values: []string{"targeted"}}}},
				want: []string{env.CapacityBlock.ID}},
			{name: "by id", in: &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{other.OpenReservation.ID}},
				want: []string{other.OpenReservation.ID}},
			{name: "unknown id", in: &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{"cr-0000000000000000a"}},
				code: "InvalidCapacityReservationId.NotFound"},
		} {
			out, err := ec2c.DescribeCapacityReservations(ctx, tc.in)
			if tc.code != "" {
				if errorCode(err) != tc.code {
					t.Errorf("%s: error %v, want %s", tc.name, err, tc.code)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var ids []string
			for _, cr := range out.CapacityReservations {
				ids = append(ids, aws.ToString(cr.CapacityReservationId))
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("%s: got %v, want %v", tc.name, ids, tc.want)
			}
		}
		out, err := ec2c.DescribeCapacityReservations(ctx, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{env.CapacityBlock.ID}})
		if err != nil {
			t.Fatal(err)
		}
		cr := out.CapacityReservations[0]
		if cr.ReservationType != ec2types.CapacityReservationTypeCapacityBlock || cr.EndDate == nil || !cr.EndDate.Equal(*env.CapacityBlock.EndDate) ||
			aws.ToString(cr.AvailabilityZone) != Zones[1] || aws.ToInt32(cr.AvailableInstanceCount) != 2 || len(cr.Tags) != 2 {
			t.Errorf("capacity block decoded as %+v", cr)
		}
	})

	t.Run("fleet instances get their launch template's security groups", func(t *testing.T) {
		groups := []string{env.NodeSecurityGroup.ID, env.ClusterSecurityGroup.ID}
		slices.Sort(groups)
		lt, err := ec2c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(env.ClusterName + "-fleet"),
			LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: aws.String(env.CustomAMIs[0].ID), SecurityGroupIds: groups}})
		if err != nil {
			t.Fatal(err)
		}
		for _, capacityType := range []ec2types.DefaultTargetCapacityType{ec2types.DefaultTargetCapacityTypeSpot, ec2types.DefaultTargetCapacityTypeOnDemand} {
			out, err := ec2c.CreateFleet(ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant,
				TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: capacityType},
				LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
					LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateId: lt.LaunchTemplate.LaunchTemplateId, Version: aws.String("$Latest")},
					Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: ec2types.InstanceTypeM5Large, SubnetId: aws.String(env.PrivateSubnets[0].ID)}},
				}}})
			if err != nil || len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 1 {
				t.Fatalf("CreateFleet (%s) = %+v, %v", capacityType, out, err)
			}
			desc, err := ec2c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: out.Instances[0].InstanceIds})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range desc.Reservations[0].Instances[0].SecurityGroups {
				got = append(got, aws.ToString(g.GroupId))
			}
			slices.Sort(got)
			if !slices.Equal(got, groups) {
				t.Errorf("%s fleet instance in security groups %v, want the template's %v", capacityType, got, groups)
			}
		}
	})

	t.Run("iam and sqs", func(t *testing.T) {
		ip, err := iam.NewFromConfig(m.Config).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(env.InstanceProfileName)})
		if err != nil || len(ip.InstanceProfile.Roles) != 1 || aws.ToString(ip.InstanceProfile.Roles[0].RoleName) != env.RoleName {
			t.Errorf("instance profile %s: %+v, %v", env.InstanceProfileName, ip, err)
		}
		q, err := sqs.NewFromConfig(m.Config).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(env.QueueName)})
		if err != nil || aws.ToString(q.QueueUrl) != env.QueueURL {
			t.Errorf("queue %s: %+v, %v", env.QueueName, q, err)
		}
	})

	t.Run("injected failures are retried and counted", func(t *testing.T) {
		for _, tc := range []struct {
			op   string
			call func() error
		}{
			{op: "ec2:DescribeSubnets", call: func() error {
				_, err := ec2c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{env.PublicSubnet.ID}})
				return err
			}},
			{op: "iam:GetRole", call: func() error {
				_, err := iam.NewFromConfig(m.Config).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(env.RoleName)})
				return err
			}},
			{op: "ssm:GetParameter", call: func() error {
				_, err := ssm.NewFromConfig(m.Config).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(env.CustomAMIParameter)})
				return err
			}},
		} {
			before := m.Calls(tc.op)
			m.FailNext(tc.op, 2, 503, "")
			if err := tc.call(); err != nil {
				t.Errorf("%s after 2 throttles: %v (the default retryer makes 3 attempts)", tc.op, err)
			}
			if got := m.Calls(tc.op) - before; got != 3 {
				t.Errorf("%s: %d calls, want 3", tc.op, got)
			}
			m.FailNext(tc.op, 3, 500, "InternalError")
			if err := tc.call(); err == nil {
				t.Errorf("%s after 3 server errors: no error", tc.op)
			}
		}
	})

	t.Run("instance status: health and events set by the test, EC2's filters and paging", func(t *testing.T) {
		testInstanceStatus(ctx, t, m, env)
	})
}

func mustPublished(t *testing.T, family, k8s, arch, variant string) string {
	t.Helper()
	a, ok := FindPublishedAMI(family, k8s, "", arch, variant)
	if !ok {
		t.Fatalf("no published %s %s %s %s AMI", family, k8s, arch, variant)
	}
	return a.ID
}

func errorCode(err error) string {
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode()
	}
	return ""
}

func TestNewWithoutMotoServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := New(context.Background()); !errors.Is(err, ErrMotoNotFound) {
		t.Errorf("New without moto_server on PATH = %v, want ErrMotoNotFound", err)
	}
	if ErrMotoNotFound.Error() != "moto_server not found: install it with `pip install 'moto[server]==5.2.1'`" {
		t.Errorf("message %q", ErrMotoNotFound)
	}
}
