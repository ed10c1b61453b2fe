package nodeclass

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
)

// discoveryTags selects what Seed tagged for the environment.
func discoveryTags(e *awstest.Env) map[string]string {
	return map[string]string{awstest.DiscoveryTag: e.ClusterName}
}

// baseSpec is the getting-started class: subnets and security groups by discovery tag, the
// latest AL2023 AMIs, and a role.
func baseSpec(e *awstest.Env) awsv1.EC2NodeClassSpec {
	return awsv1.EC2NodeClassSpec{
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discoveryTags(e)}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discoveryTags(e)}},
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		Role:                       e.RoleName,
	}
}

func allReady() map[string]condWant {
	return map[string]condWant{
		awsv1.ConditionTypeReady: ok(), awsv1.ConditionTypeSubnetsReady: ok(), awsv1.ConditionTypeSecurityGroupsReady: ok(),
		awsv1.ConditionTypeAMIsReady: ok(), awsv1.ConditionTypeInstanceProfileReady: ok(), awsv1.ConditionTypeCapacityReservationsReady: ok(),
	}
}

// with returns allReady with some conditions replaced.
func with(changes map[string]condWant) map[string]condWant {
	out := allReady()
	for k, v := range changes {
		out[k] = v
	}
	return out
}

// published returns the IDs of the published AMIs of a family, Kubernetes version and release
// ("" for the newest), every architecture and variant.
func published(t *testing.T, family, k8s, release string) []string {
	t.Helper()
	var ids []string
	for _, arch := range []string{"x86_64", "arm64"} {
		for _, variant := range []string{"standard", "nvidia"} {
			if a, ok := awstest.FindPublishedAMI(family, k8s, release, arch, variant); ok {
				ids = append(ids, a.ID)
			}
		}
	}
	if len(ids) == 0 {
		t.Fatalf("no published %s %s AMIs of release %q", family, k8s, release)
	}
	slices.Sort(ids)
	return ids
}

func amiIDs(nc *awsv1.EC2NodeClass) []string {
	var ids []string
	for _, a := range nc.Status.AMIs {
		ids = append(ids, a.ID)
	}
	slices.Sort(ids)
	return ids
}

func wantAMIs(t *testing.T, nc *awsv1.EC2NodeClass, want []string) {
	t.Helper()
	want = slices.Clone(want)
	slices.Sort(want)
	if got := amiIDs(nc); !slices.Equal(got, want) {
		t.Errorf("status.amis = %v, want %v", got, want)
	}
}

// TestResolve creates one class per case, lets the controller (in a manager, against moto and
// a real apiserver) resolve it, and checks its conditions and status.
func TestResolve(t *testing.T) {
	f := start(t, Options{})
	e := f.aws
	al2023x86, _ := awstest.FindPublishedAMI("AL2023", "1.36", "", "x86_64", "standard")
	oldARM, _ := awstest.FindPublishedAMI("AL2023", "1.36", awstest.AmazonLinuxReleases[0], "arm64", "standard")
	windows, _ := awstest.FindPublishedAMI("Windows2022", "1.36", "", "x86_64", "standard")

	for _, tc := range []struct {
		name  string
		spec  func(awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec
		want  map[string]condWant
		check func(t *testing.T, nc *awsv1.EC2NodeClass)
	}{
		{
			name: "alias al2023@latest with tag selectors becomes Ready",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec { return s },
			want: with(map[string]condWant{
				awsv1.ConditionTypeSubnetsReady: {status: "True", contains: []string{"3 subnets in us-east-1a, us-east-1b, us-east-1c"}},
			}),
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				var want []awsv1.Subnet
				for _, s := range e.PrivateSubnets {
					want = append(want, awsv1.Subnet{ID: s.ID, Zone: s.Zone, ZoneID: s.ZoneID})
				}
				if !equality.Semantic.DeepEqual(nc.Status.Subnets, want) {
					t.Errorf("status.subnets = %+v, want %+v", nc.Status.Subnets, want)
				}
				groups := []awsv1.SecurityGroup{{ID: e.NodeSecurityGroup.ID, Name: e.NodeSecurityGroup.Name}, {ID: e.ClusterSecurityGroup.ID, Name: e.ClusterSecurityGroup.Name}}
				slices.SortFunc(groups, func(a, b awsv1.SecurityGroup) int { return strings.Compare(a.ID, b.ID) })
				if !equality.Semantic.DeepEqual(nc.Status.SecurityGroups, groups) {
					t.Errorf("status.securityGroups = %+v, want %+v", nc.Status.SecurityGroups, groups)
				}
				wantAMIs(t, nc, published(t, "AL2023", "1.36", ""))
				for _, a := range nc.Status.AMIs {
					if a.ID != al2023x86.ID {
						continue
					}
					want := linuxRequirements("x86_64", "standard")
					if a.Name != al2023x86.Name || !equality.Semantic.DeepEqual(a.Requirements, want) {
						t.Errorf("AMI %s: %+v, want name %s and requirements %+v", a.ID, a, al2023x86.Name, want)
					}
				}
				profile := nc.Annotations[awsv1.AnnotationInstanceProfile]
				if profile == "" || nc.Status.InstanceProfile != profile || !strings.HasPrefix(profile, testClusterName+"_") {
					t.Errorf("instance profile: status %q, annotation %q", nc.Status.InstanceProfile, profile)
				}
				out, err := iam.NewFromConfig(moto.Config).GetInstanceProfile(context.Background(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(profile)})
				if err != nil || len(out.InstanceProfile.Roles) != 1 || aws.ToString(out.InstanceProfile.Roles[0].RoleName) != e.RoleName {
					t.Fatalf("instance profile %s in IAM: %+v, %v; want it holding %s", profile, out, err, e.RoleName)
				}
				tags := map[string]string{}
				for _, tag := range out.InstanceProfile.Tags {
					tags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
				}
				for k, v := range map[string]string{awsv1.TagNodeClass: nc.Name, awsv1.TagEKSClusterName: testClusterName,
					awsv1.TagKubernetesClusterPrefix + testClusterName: "owned", TagRegion: awstest.Region} {
					if tags[k] != v {
						t.Errorf("instance profile tag %s = %q, want %q (tags %v)", k, tags[k], v, tags)
					}
				}
				if p := aws.ToString(out.InstanceProfile.Path); p != "/karpenter/us-east-1/"+testClusterName+"/"+string(nc.UID)+"/" {
					t.Errorf("instance profile path %s", p)
				}
				if !controllerutil.ContainsFinalizer(nc, awsv1.TerminationFinalizer) {
					t.Errorf("finalizers %v lack %s", nc.Finalizers, awsv1.TerminationFinalizer)
				}
				if nc.Annotations[awsv1.AnnotationEC2NodeClassHash] != Hash(nc) || nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != HashVersion {
					t.Errorf("hash annotations %v, want %s %s", nc.Annotations, Hash(nc), HashVersion)
				}
			},
		},
		{
			name: "pinned al2023 release",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@" + awstest.AmazonLinuxReleases[0]}}
				return s
			},
			want: allReady(),
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				wantAMIs(t, nc, published(t, "AL2023", "1.36", awstest.AmazonLinuxReleases[0]))
			},
		},
		{
			name: "pinned bottlerocket release",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "bottlerocket@v" + awstest.BottlerocketReleases[0]}}
				return s
			},
			want: allReady(),
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				wantAMIs(t, nc, published(t, "Bottlerocket", "1.36", awstest.BottlerocketReleases[0]))
			},
		},
		{
			name: "windows2022@latest",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "windows2022@latest"}}
				return s
			},
			want: allReady(),
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				wantAMIs(t, nc, []string{windows.ID})
				want := []corev1.NodeSelectorRequirement{
					{Key: "kubernetes.io/arch", Operator: "In", Values: []string{"amd64"}},
					{Key: "kubernetes.io/os", Operator: "In", Values: []string{"windows"}},
					{Key: "node.kubernetes.io/windows-build", Operator: "In", Values: []string{"10.0.20348"}},
				}
				if len(nc.Status.AMIs) == 1 && !equality.Semantic.DeepEqual(nc.Status.AMIs[0].Requirements, want) {
					t.Errorf("requirements %+v, want %+v", nc.Status.AMIs[0].Requirements, want)
				}
			},
		},
		{
			name: "al2@latest has no AMI for Kubernetes 1.36",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2@latest"}}
				return s
			},
			want: with(map[string]condWant{
				awsv1.ConditionTypeAMIsReady: notOK(awsv1.ReasonAMINotFound, "spec.amiSelectorTerms[0].alias al2@latest",
					"AWS publishes no AL2 AMI release \"latest\" for Kubernetes 1.36", "/aws/service/eks/optimized-ami/1.36/amazon-linux-2/recommended/image_id"),
				awsv1.ConditionTypeReady: notOK(ReasonUnhealthyDependents, "AMIsReady=False"),
			}),
		},
		{
			name: "AMIs by tags: the newest per architecture",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.AMIFamily = ptr.To(awsv1.AMIFamilyAL2023)
				s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: discoveryTags(e)}, {Name: "amazon-eks-node-al2023-*-standard-1.36-*", Owner: "amazon"}}
				return s
			},
			want: allReady(),
			// The copies are newer than the published AMIs they were copied from.
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				wantAMIs(t, nc, []string{e.CustomAMIs[0].ID, e.CustomAMIs[1].ID})
			},
		},
		{
			name: "AMIs by name and owner: the newest release",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.AMIFamily = ptr.To(awsv1.AMIFamilyAL2023)
				s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Name: "amazon-eks-node-al2023-x86_64-standard-1.36-*", Owner: "amazon"}}
				return s
			},
			want:  allReady(),
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) { wantAMIs(t, nc, []string{al2023x86.ID}) },
		},
		{
			name: "AMIs by id and by SSM parameter",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.AMIFamily = ptr.To(awsv1.AMIFamilyCustom)
				s.AMISelectorTerms = []awsv1.AMISelectorTerm{{ID: oldARM.ID}, {SSMParameter: e.CustomAMIParameter}}
				return s
			},
			want:  allReady(),
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) { wantAMIs(t, nc, []string{oldARM.ID, e.CustomAMIs[0].ID}) },
		},
		{
			name: "AMI selector matching nothing",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.AMIFamily = ptr.To(awsv1.AMIFamilyAL2023)
				s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{awstest.DiscoveryTag: "nobody"}}, {SSMParameter: "/nobody/ami"}}
				return s
			},
			want: with(map[string]condWant{
				awsv1.ConditionTypeAMIsReady: notOK(awsv1.ReasonAMINotFound, "spec.amiSelectorTerms[0] (tags karpenter.sh/discovery=nobody)",
					"spec.amiSelectorTerms[1] (ssmParameter /nobody/ami): the SSM parameter does not exist", "fix spec.amiSelectorTerms"),
				awsv1.ConditionTypeReady: notOK(ReasonUnhealthyDependents, "AMIsReady=False"),
			}),
		},
		{
			name: "subnet selector matching nothing",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{awstest.DiscoveryTag: "nobody"}}}
				return s
			},
			want: with(map[string]condWant{
				awsv1.ConditionTypeSubnetsReady: notOK(awsv1.ReasonSubnetsNotFound, "no subnet matches spec.subnetSelectorTerms[0] (tags karpenter.sh/discovery=nobody)",
					"fix spec.subnetSelectorTerms"),
				awsv1.ConditionTypeReady: notOK(ReasonUnhealthyDependents, "SubnetsReady=False (no subnet matches"),
			}),
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				if len(nc.Status.Subnets) != 0 || len(nc.Status.SecurityGroups) != 2 {
					t.Errorf("status: %d subnets, %d security groups; want 0 and 2", len(nc.Status.Subnets), len(nc.Status.SecurityGroups))
				}
			},
		},
		{
			name: "subnets by id and by tags with a wildcard",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{ID: e.PublicSubnet.ID},
					{Tags: map[string]string{"Name": e.PrivateSubnets[1].Tags["Name"], "kubernetes.io/role/internal-elb": "*"}}}
				return s
			},
			want: allReady(),
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				want := []awsv1.Subnet{{ID: e.PublicSubnet.ID, Zone: e.PublicSubnet.Zone, ZoneID: e.PublicSubnet.ZoneID},
					{ID: e.PrivateSubnets[1].ID, Zone: e.PrivateSubnets[1].Zone, ZoneID: e.PrivateSubnets[1].ZoneID}}
				if !equality.Semantic.DeepEqual(nc.Status.Subnets, want) {
					t.Errorf("status.subnets = %+v, want %+v", nc.Status.Subnets, want)
				}
			},
		},
		{
			name: "security groups by name, with a term matching nothing",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Name: e.OtherSecurityGroup.Name}, {ID: "sg-0123456789abcdef0"}}
				return s
			},
			want: with(map[string]condWant{
				awsv1.ConditionTypeSecurityGroupsReady: {status: "True", contains: []string{"1 security groups; matched nothing: spec.securityGroupSelectorTerms[1] (id sg-0123456789abcdef0)"}},
			}),
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				if want := []awsv1.SecurityGroup{{ID: e.OtherSecurityGroup.ID, Name: e.OtherSecurityGroup.Name}}; !equality.Semantic.DeepEqual(nc.Status.SecurityGroups, want) {
					t.Errorf("status.securityGroups = %+v, want %+v", nc.Status.SecurityGroups, want)
				}
			},
		},
		{
			name: "security group selector matching nothing",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Name: "nobody"}, {Tags: map[string]string{awstest.DiscoveryTag: e.ClusterName, "team": "*"}}}
				return s
			},
			want: with(map[string]condWant{
				awsv1.ConditionTypeSecurityGroupsReady: notOK(awsv1.ReasonSecurityGroupsNotFound,
					"no security group matches spec.securityGroupSelectorTerms[0] (name nobody), spec.securityGroupSelectorTerms[1] (tags karpenter.sh/discovery="+e.ClusterName+", team=*)",
					"fix spec.securityGroupSelectorTerms"),
				awsv1.ConditionTypeReady: notOK(ReasonUnhealthyDependents, "SecurityGroupsReady=False"),
			}),
		},
		{
			name: "existing instance profile",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.Role, s.InstanceProfile = "", ptr.To(e.InstanceProfileName)
				return s
			},
			want: with(map[string]condWant{awsv1.ConditionTypeInstanceProfileReady: {status: "True", contains: []string{"instance profile " + e.InstanceProfileName}}}),
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				if nc.Status.InstanceProfile != e.InstanceProfileName || nc.Annotations[awsv1.AnnotationInstanceProfile] != "" {
					t.Errorf("status.instanceProfile %q, annotation %q; want %q and none", nc.Status.InstanceProfile, nc.Annotations[awsv1.AnnotationInstanceProfile], e.InstanceProfileName)
				}
			},
		},
		{
			name: "missing instance profile",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.Role, s.InstanceProfile = "", ptr.To(e.ClusterName+"-absent")
				return s
			},
			want: with(map[string]condWant{
				awsv1.ConditionTypeInstanceProfileReady: notOK(awsv1.ReasonInstanceProfileNotFound, "spec.instanceProfile: instance profile "+e.ClusterName+"-absent does not exist"),
				awsv1.ConditionTypeReady:                notOK(ReasonUnhealthyDependents, "InstanceProfileReady=False"),
			}),
		},
		{
			name: "instance profile given as an ARN",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.Role, s.InstanceProfile = "", ptr.To("arn:aws:iam::"+awstest.AccountID+":instance-profile/"+e.InstanceProfileName)
				return s
			},
			want: with(map[string]condWant{
				awsv1.ConditionTypeInstanceProfileReady: notOK(awsv1.ReasonInstanceProfileNotFound, "is an ARN: set the instance profile's name, "+e.InstanceProfileName),
				awsv1.ConditionTypeReady:                notOK(ReasonUnhealthyDependents),
			}),
		},
		{
			name: "missing role",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.Role = e.ClusterName + "-absent"
				return s
			},
			want: with(map[string]condWant{
				awsv1.ConditionTypeInstanceProfileReady: notOK("RoleNotFound", "spec.role: IAM role "+e.ClusterName+"-absent does not exist"),
				awsv1.ConditionTypeReady:                notOK(ReasonUnhealthyDependents),
			}),
		},
		{
			name: "capacity reservations by tags",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: discoveryTags(e)}}
				return s
			},
			want: with(map[string]condWant{awsv1.ConditionTypeCapacityReservationsReady: {status: "True", contains: []string{"2 active capacity reservations"}}}),
			check: func(t *testing.T, nc *awsv1.EC2NodeClass) {
				if len(nc.Status.CapacityReservations) != 2 {
					t.Fatalf("status.capacityReservations = %+v, want 2", nc.Status.CapacityReservations)
				}
				for _, cr := range nc.Status.CapacityReservations {
					switch cr.ID {
					case e.OpenReservation.ID:
						want := awsv1.CapacityReservation{ID: cr.ID, AvailabilityZone: awstest.Zones[0], InstanceType: "m5.large", InstanceMatchCriteria: "open",
							OwnerID: awstest.AccountID, ReservationType: awsv1.CapacityReservationTypeDefault, State: awsv1.CapacityReservationStateActive}
						if !equality.Semantic.DeepEqual(cr, want) {
							t.Errorf("open reservation %+v, want %+v", cr, want)
						}
					case e.CapacityBlock.ID:
						if cr.ReservationType != awsv1.CapacityReservationTypeCapacityBlock || cr.InstanceMatchCriteria != "targeted" ||
							cr.EndTime == nil || !cr.EndTime.Time.Equal(*e.CapacityBlock.EndDate) || cr.State != awsv1.CapacityReservationStateActive {
							t.Errorf("capacity block %+v", cr)
						}
					default:
						t.Errorf("unexpected reservation %s", cr.ID)
					}
				}
			},
		},
		{
			name: "capacity reservation that does not exist",
			spec: func(s awsv1.EC2NodeClassSpec) awsv1.EC2NodeClassSpec {
				s.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: "cr-00000000000000000"}}
				return s
			},
			want: with(map[string]condWant{awsv1.ConditionTypeCapacityReservationsReady: {status: "True",
				contains: []string{"no active capacity reservation matches spec.capacityReservationSelectorTerms[0] (id cr-00000000000000000)"}}}),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := createClass(t, tc.spec(baseSpec(e)))
			got := waitConditions(t, nc.Name, tc.want)
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}
