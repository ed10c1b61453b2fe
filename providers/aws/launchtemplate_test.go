package aws

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"
)

func testTemplateConfig() *launchTemplateConfig {
	return &launchTemplateConfig{
		ClusterName: "prod", NodeClass: "default", ImageID: "ami-1", SecurityGroupIDs: []string{"sg-1", "sg-2"},
		UserData: encodeUserData("hello"), InstanceProfile: "prod-profile",
		BlockDeviceMappings: defaultBlockDevices(awsv1.AMIFamilyAL2023),
		MetadataOptions:     metadataDefaults(nil),
		Tags:                map[string]string{"team": "a"},
	}
}

func TestLaunchTemplateName(t *testing.T) {
	a, err := testTemplateConfig().name()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := testTemplateConfig().name()
	if a != b || len(a) > 128 || a[:len("joiner/prod/")] != "joiner/prod/" {
		t.Errorf("names %q and %q: want equal, at most 128 characters, under joiner/prod/", a, b)
	}
	for name, change := range map[string]func(*launchTemplateConfig){
		"image":     func(c *launchTemplateConfig) { c.ImageID = "ami-2" },
		"groups":    func(c *launchTemplateConfig) { c.SecurityGroupIDs = []string{"sg-1"} },
		"user data": func(c *launchTemplateConfig) { c.UserData = encodeUserData("bye") },
		"volume size": func(c *launchTemplateConfig) {
			q := resource.MustParse("30Gi")
			c.BlockDeviceMappings[0].EBS.VolumeSize = &q
		},
		"tags":     func(c *launchTemplateConfig) { c.Tags = map[string]string{"team": "b"} },
		"metadata": func(c *launchTemplateConfig) { c.MetadataOptions.HTTPTokens = aws.String("optional") },
	} {
		c := testTemplateConfig()
		change(c)
		if n, _ := c.name(); n == a {
			t.Errorf("changing the %s kept the name", name)
		}
	}
}

func TestLaunchTemplateData(t *testing.T) {
	d := testTemplateConfig().launchTemplateData()
	if aws.ToString(d.ImageId) != "ami-1" || len(d.SecurityGroupIds) != 2 || len(d.NetworkInterfaces) != 0 ||
		aws.ToString(d.IamInstanceProfile.Name) != "prod-profile" || aws.ToString(d.UserData) != "aGVsbG8=" {
		t.Errorf("basic fields wrong: %+v", d)
	}
	m := d.MetadataOptions
	if m.HttpEndpoint != "enabled" || m.HttpProtocolIpv6 != "disabled" || aws.ToInt32(m.HttpPutResponseHopLimit) != 1 || m.HttpTokens != "required" {
		t.Errorf("metadata defaults wrong: %+v", m)
	}
	if len(d.BlockDeviceMappings) != 1 || aws.ToString(d.BlockDeviceMappings[0].DeviceName) != "/dev/xvda" ||
		aws.ToInt32(d.BlockDeviceMappings[0].Ebs.VolumeSize) != 20 || d.BlockDeviceMappings[0].Ebs.VolumeType != ec2types.VolumeTypeGp3 ||
		!aws.ToBool(d.BlockDeviceMappings[0].Ebs.Encrypted) || !aws.ToBool(d.BlockDeviceMappings[0].Ebs.DeleteOnTermination) {
		t.Errorf("default root volume wrong: %+v", d.BlockDeviceMappings)
	}

	// With a public IP or interfaces, the groups move onto the interfaces.
	c := testTemplateConfig()
	c.AssociatePublicIP = aws.Bool(true)
	c.NetworkInterfaces = []awsv1.NetworkInterface{
		{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.NetworkInterfaceTypeInterface},
		{NetworkCardIndex: 1, DeviceIndex: 0, InterfaceType: awsv1.NetworkInterfaceTypeEFAOnly},
	}
	c.ConnectionTracking = &awsv1.ConnectionTracking{UDPTimeout: aws.Int32(30)}
	d = c.launchTemplateData()
	if len(d.SecurityGroupIds) != 0 || len(d.NetworkInterfaces) != 2 {
		t.Fatalf("want groups on 2 interfaces, got %+v", d)
	}
	primary, efa := d.NetworkInterfaces[0], d.NetworkInterfaces[1]
	if !aws.ToBool(primary.AssociatePublicIpAddress) || len(primary.Groups) != 2 || primary.ConnectionTrackingSpecification == nil {
		t.Errorf("primary interface wrong: %+v", primary)
	}
	if aws.ToString(efa.InterfaceType) != "efa-only" || efa.AssociatePublicIpAddress != nil || aws.ToInt32(efa.NetworkCardIndex) != 1 {
		t.Errorf("efa interface wrong: %+v", efa)
	}
	if got := defaultBlockDevices(awsv1.AMIFamilyBottlerocket); len(got) != 2 || aws.ToString(got[1].DeviceName) != "/dev/xvdb" {
		t.Errorf("Bottlerocket default volumes = %+v", got)
	}
	if got := defaultBlockDevices(awsv1.AMIFamilyCustom); got != nil {
		t.Errorf("Custom default volumes = %+v, want none", got)
	}
}

func TestFleetOptions(t *testing.T) {
	api := &fakeEC2{
		types: []ec2types.InstanceTypeInfo{
			ec2Type("m5.large", "x86_64", 2, 8192, 3, 10),
			ec2Type("m5.xlarge", "x86_64", 4, 16384, 4, 15),
			ec2Type("m5.2xlarge", "x86_64", 8, 32768, 4, 15),
			ec2Type("c5.large", "x86_64", 2, 4096, 3, 10),
			ec2Type("r5.large", "x86_64", 2, 16384, 3, 10),
		},
	}
	for _, it := range api.types {
		api.offerings = append(api.offerings, offering(string(it.InstanceType), "us-east-1a"), offering(string(it.InstanceType), "us-east-1b"))
	}
	b, _ := newTestBuilder(t, api)
	p := &Provider{unavailable: b.unavailable, opts: Options{MaxInstanceTypes: 60}}
	view, _ := newClassView(testClass(), DefaultVMMemoryOverheadPercent, 0)
	get := func() *builtTypes {
		built, err := b.get(view)
		if err != nil {
			t.Fatal(err)
		}
		return built
	}
	reqs := func(rs ...requirements.Requirement) requirements.Requirements { return requirements.New(rs...) }
	cpu := func(s string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
	}

	ct, opts, err := p.fleetOptions(get(), reqs(), cpu("1"))
	if err != nil || ct != karpv1.CapacityTypeSpot || len(opts) != 5 {
		t.Fatalf("no constraints: %s, %d options, %v; want spot with all 5 types", ct, len(opts), err)
	}
	for i := 1; i < len(opts); i++ {
		if opts[i].price < opts[i-1].price {
			t.Errorf("options not sorted by price: %s %v before %s %v", opts[i-1].bt.it.Name, opts[i-1].price, opts[i].bt.it.Name, opts[i].price)
		}
	}
	ct, opts, _ = p.fleetOptions(get(), reqs(requirements.In(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeOnDemand)), cpu("3"))
	if ct != karpv1.CapacityTypeOnDemand || len(opts) != 2 {
		t.Errorf("on-demand, 3 cpus: %s with %d options, want on-demand m5.xlarge and m5.2xlarge", ct, len(opts))
	}
	p.opts.MaxInstanceTypes = 2
	_, opts, _ = p.fleetOptions(get(), reqs(), cpu("1"))
	if len(opts) != 2 {
		t.Errorf("MaxInstanceTypes 2 kept %d options", len(opts))
	}
	// minValues widens the truncated list until enough families are in.
	_, opts, err = p.fleetOptions(get(), reqs(requirements.Exists(awsv1.LabelInstanceFamily).WithMinValues(3)), cpu("1"))
	if err != nil {
		t.Fatal(err)
	}
	families := map[string]bool{}
	for _, o := range opts {
		families[o.bt.info.Family] = true
	}
	if len(families) < 3 {
		t.Errorf("minValues 3 on instance-family kept %d families", len(families))
	}
	p.opts.MaxInstanceTypes = 60
	// When spot cannot meet minValues (m5 spot ran out), on-demand, which can, is chosen.
	for _, it := range []string{"m5.large", "m5.xlarge", "m5.2xlarge"} {
		for _, z := range []string{"us-east-1a", "us-east-1b"} {
			p.unavailable.MarkUnavailable(it, z, karpv1.CapacityTypeSpot)
		}
	}
	ct, _, err = p.fleetOptions(get(), reqs(requirements.Exists(awsv1.LabelInstanceFamily).WithMinValues(3)), cpu("1"))
	if err != nil || ct != karpv1.CapacityTypeOnDemand {
		t.Errorf("minValues 3 with only 2 spot families: %s, %v; want on-demand", ct, err)
	}
	// With every spot offering out of capacity, the launch falls back to on-demand.
	p.unavailable.MarkCapacityTypeUnavailable(karpv1.CapacityTypeSpot)
	if ct, _, _ = p.fleetOptions(get(), reqs(), cpu("1")); ct != karpv1.CapacityTypeOnDemand {
		t.Errorf("with spot out of capacity: %s, want on-demand", ct)
	}
	// Nothing fits: an insufficient-capacity error.
	if _, _, err = p.fleetOptions(get(), reqs(), cpu("64")); err == nil {
		t.Error("64 cpus fit somewhere")
	}
}
