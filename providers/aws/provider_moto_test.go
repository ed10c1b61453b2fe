package aws

import (
	"context"
	"encoding/base64"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/requirements"
)

// m5Family keeps launches on a few well-known types, so the cheapest offering is predictable.
var m5Family = req(awsv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "m5", "c5")

// TestMotoInstanceTypesFromEC2 reads the region's types from moto's DescribeInstanceTypes and
// DescribeInstanceTypeOfferings, and checks that moto's placeholder spot prices do not replace
// the catalog's.
func TestMotoInstanceTypesFromEC2(t *testing.T) {
	f := newMotoFixture(t, Options{})
	ctx := context.Background()
	infos, _, origin := f.p.source.snapshot()
	if origin != TypeSourceEC2 || len(infos) < 500 {
		t.Fatalf("origin %s with %d types, want EC2's (hundreds)", origin, len(infos))
	}
	its, err := f.p.GetInstanceTypes(ctx, testNodePool())
	if err != nil {
		t.Fatal(err)
	}
	var m5 *cloudprovider.InstanceType
	for _, it := range its {
		if it.Name == "m5.large" {
			m5 = it
		}
	}
	if m5 == nil {
		t.Fatalf("m5.large missing among %d types", len(its))
	}
	alloc := m5.Allocatable()
	if cpu, mem, pods := alloc[corev1.ResourceCPU], alloc[corev1.ResourceMemory], alloc[corev1.ResourcePods]; cpu.MilliValue() != 1930 || mem.Value() != 6903<<20 || pods.Value() != 29 {
		t.Errorf("m5.large allocatable %s/%s/%s, want 1930m/6903Mi/29", cpu.String(), mem.String(), pods.String())
	}
	zones, _ := m5.Requirements.Get(karpv1.LabelTopologyZone)
	if !slices.Equal(zones.Values(), awstest.Zones) {
		t.Errorf("m5.large zones %v, want the seeded subnets' %v", zones.Values(), awstest.Zones)
	}
	before, _ := f.p.pricing.Spot("m5.large", awstest.Zones[0])
	if err := f.p.RefreshSpotPrices(ctx); err != nil {
		t.Fatal(err)
	}
	if after, _ := f.p.pricing.Spot("m5.large", awstest.Zones[0]); after != before || after < 0.01 {
		t.Errorf("spot price of m5.large went from %v to %v after moto's placeholder history", before, after)
	}
	if _, rejected := f.p.pricing.SpotUpdated(); rejected == 0 {
		t.Error("no placeholder spot price was rejected")
	}
}

// TestMotoLaunchListTerminate launches through CreateFleet, finds the instance with Get and
// List, checks its tags and launch template, and terminates it; it reports the AWS calls per
// launched node.
func TestMotoLaunchListTerminate(t *testing.T) {
	f := newMotoFixture(t, Options{})
	ctx := context.Background()

	claim := nodeClaim("1", m5Family)
	launched, err := f.p.Create(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	first := f.faults.Calls()
	id, err := ParseProviderID(launched.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	l := launched.Labels
	if l[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeSpot || l[karpv1.LabelTopologyRegion] != awstest.Region ||
		!slices.Contains(awstest.Zones, l[karpv1.LabelTopologyZone]) || l[awsv1.LabelTopologyZoneID] == "" ||
		l[awsv1.LabelInstanceFamily] == "" || l[awsv1.LabelNodeClass] != "default" || l[karpv1.NodePoolLabelKey] != "default" {
		t.Errorf("launched labels wrong: %v", l)
	}
	if launched.Status.ImageID != f.env.CustomAMIs[0].ID || launched.Status.Capacity.Cpu().IsZero() || launched.Status.Allocatable.Memory().IsZero() {
		t.Errorf("launched status wrong: %+v", launched.Status)
	}
	// The cheapest allowed spot offering was chosen.
	cheapest := cheapestOffering(t, f, karpv1.CapacityTypeSpot, "m5", "c5")
	if l[karpv1.LabelInstanceType] != cheapest.it || l[karpv1.LabelTopologyZone] != cheapest.zone {
		t.Errorf("launched %s in %s, want the cheapest spot offering %s in %s", l[karpv1.LabelInstanceType], l[karpv1.LabelTopologyZone], cheapest.it, cheapest.zone)
	}

	// The instance carries the tags, the subnet of its zone and the template's image.
	out, err := f.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	inst := instanceFromEC2(out.Reservations[0].Instances[0])
	wantTags := map[string]string{
		"karpenter.sh/nodepool": "default", "karpenter.sh/nodeclaim": claim.Name, "karpenter.k8s.aws/ec2nodeclass": "default",
		"kubernetes.io/cluster/" + f.env.ClusterName: "owned", "eks:eks-cluster-name": f.env.ClusterName, "team": "payments",
	}
	for k, v := range wantTags {
		if inst.Tags[k] != v {
			t.Errorf("instance tag %s = %q, want %q (tags %v)", k, inst.Tags[k], v, inst.Tags)
		}
	}
	if inst.ImageID != f.env.CustomAMIs[0].ID || inst.CapacityType != karpv1.CapacityTypeSpot || inst.Zone != l[karpv1.LabelTopologyZone] {
		t.Errorf("instance %+v does not match the launch", inst)
	}
	if !slices.ContainsFunc(f.env.PrivateSubnets, func(s awstest.Subnet) bool { return s.ID == inst.SubnetID }) {
		t.Errorf("instance in subnet %s, not one of the class's", inst.SubnetID)
	}

	// One launch template, named joiner/<cluster>/<hash>, with the AL2023 NodeConfig.
	lts, err := f.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:eks:eks-cluster-name"), Values: []string{f.env.ClusterName}}}})
	if err != nil || len(lts.LaunchTemplates) != 1 {
		t.Fatalf("launch templates of the cluster: %v, %v", lts, err)
	}
	ltName := aws.ToString(lts.LaunchTemplates[0].LaunchTemplateName)
	if !strings.HasPrefix(ltName, "joiner/"+f.env.ClusterName+"/") {
		t.Errorf("launch template name %q", ltName)
	}
	versions, err := f.ec2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateName: aws.String(ltName)})
	if err != nil {
		t.Fatal(err)
	}
	data := versions.LaunchTemplateVersions[0].LaunchTemplateData
	userData, _ := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	for _, want := range []string{"kind: NodeConfig", "apiServerEndpoint: https://" + f.env.ClusterName + ".example.com", "--node-labels=", "karpenter.sh/unregistered:NoExecute"} {
		if !strings.Contains(string(userData), want) {
			t.Errorf("user data lacks %q:\n%s", want, userData)
		}
	}
	if sgs := slices.Sorted(slices.Values(data.SecurityGroupIds)); !slices.Equal(sgs, classGroups(f)) || data.MetadataOptions.HttpTokens != "required" {
		t.Errorf("template groups %v / metadata %+v", data.SecurityGroupIds, data.MetadataOptions)
	}

	// A second launch of the same configuration reuses the template: one CreateFleet, nothing else.
	f.faults.ResetCalls()
	second, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	if err != nil {
		t.Fatal(err)
	}
	steady := f.faults.Calls()
	t.Logf("AWS calls for the first node of a configuration: %v", first)
	t.Logf("AWS calls per further node: %v", steady)
	if first["ec2:CreateFleet"] != 1 || first["ec2:CreateLaunchTemplate"] != 1 || total(first) != 2 {
		t.Errorf("first launch made calls %v, want one CreateLaunchTemplate and one CreateFleet", first)
	}
	if steady["ec2:CreateFleet"] != 1 || total(steady) != 1 {
		t.Errorf("second launch made calls %v, want one CreateFleet", steady)
	}

	// Get and List see both; List is scoped to the cluster.
	got, err := f.p.Get(ctx, launched.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != claim.Name || got.Labels[karpv1.LabelInstanceType] != l[karpv1.LabelInstanceType] || got.Status.ImageID != launched.Status.ImageID ||
		got.Status.Capacity.Cpu().Cmp(*launched.Status.Capacity.Cpu()) != 0 {
		t.Errorf("Get = %+v, want the launched NodeClaim's name, labels, image and capacity", got)
	}
	other := newMotoFixture(t, Options{})
	if _, err := other.p.Create(ctx, nodeClaim("1", m5Family)); err != nil {
		t.Fatal(err)
	}
	listed, err := f.p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := providerIDs(listed)
	if want := sortedStrings(launched.Status.ProviderID, second.Status.ProviderID); !slices.Equal(ids, want) {
		t.Errorf("List = %v, want this cluster's %v", ids, want)
	}

	// Delete terminates, then reports the instance gone; Get and List agree.
	if err := f.p.Delete(ctx, launched); err != nil {
		t.Fatalf("first Delete: %v", err)
	}
	if err := f.p.Delete(ctx, launched); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("second Delete = %v, want NodeClaimNotFound", err)
	}
	if _, err := f.p.Get(ctx, launched.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("Get after Delete = %v, want NodeClaimNotFound", err)
	}
	if listed, _ := f.p.List(ctx); !slices.Equal(providerIDs(listed), []string{second.Status.ProviderID}) {
		t.Errorf("List after Delete = %v", providerIDs(listed))
	}
	unknown := launched.DeepCopy()
	unknown.Status.ProviderID = ProviderID(awstest.Zones[0], "i-0123456789abcdef0")
	if err := f.p.Delete(ctx, unknown); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("Delete of an unknown instance = %v, want NodeClaimNotFound", err)
	}
	if _, err := f.p.Get(ctx, unknown.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("Get of an unknown instance = %v, want NodeClaimNotFound", err)
	}
}

// TestMotoCapacityErrorRoutesAround makes the cheapest offering run out: the fleet falls back
// within the same call, the refused offering becomes unavailable for the simulation, the next
// Create does not ask for it, and it comes back after the TTL.
func TestMotoCapacityErrorRoutesAround(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	f := newMotoFixture(t, Options{Clock: clk})
	ctx := context.Background()
	cheapest := cheapestOffering(t, f, karpv1.CapacityTypeSpot, "m5", "c5")
	f.faults.AddCapacityFault(awstest.CapacityFault{InstanceType: cheapest.it, Zone: cheapest.zone, CapacityType: karpv1.CapacityTypeSpot})

	first, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	if err != nil {
		t.Fatal(err)
	}
	if first.Labels[karpv1.LabelInstanceType] == cheapest.it && first.Labels[karpv1.LabelTopologyZone] == cheapest.zone {
		t.Fatalf("launched the refused offering %+v", cheapest)
	}
	fleets := f.faults.Fleets()
	if len(fleets) != 1 || len(fleets[0].Refused) != 1 {
		t.Fatalf("fleets %+v, want one with one refused override", fleets)
	}
	if !f.p.unavailable.IsUnavailable(cheapest.it, cheapest.zone, karpv1.CapacityTypeSpot) {
		t.Fatal("the refused offering is not marked unavailable")
	}
	// The simulation sees it unavailable.
	if o := offeringOf(t, f, cheapest.it, cheapest.zone, karpv1.CapacityTypeSpot); o.Available {
		t.Error("GetInstanceTypes still offers the refused offering")
	}
	// The next launch does not ask for it, and picks the next cheapest.
	second, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	if err != nil {
		t.Fatal(err)
	}
	fleets = f.faults.Fleets()
	for _, o := range fleets[1].Overrides {
		if o.InstanceType == cheapest.it && o.Zone == cheapest.zone {
			t.Errorf("second CreateFleet asked for the unavailable offering again")
		}
	}
	next := cheapestOffering(t, f, karpv1.CapacityTypeSpot, "m5", "c5")
	if second.Labels[karpv1.LabelInstanceType] != next.it || second.Labels[karpv1.LabelTopologyZone] != next.zone {
		t.Errorf("second launch %s in %s, want the next cheapest %+v", second.Labels[karpv1.LabelInstanceType], second.Labels[karpv1.LabelTopologyZone], next)
	}
	// After the TTL the offering is available again.
	clk.Step(DefaultUnavailableTTL + time.Second)
	if o := offeringOf(t, f, cheapest.it, cheapest.zone, karpv1.CapacityTypeSpot); !o.Available {
		t.Error("the offering is still unavailable after the TTL")
	}
}

// TestMotoSpotExhaustedFallsBackToOnDemand refuses every spot override: Create returns an
// InsufficientCapacityError, and the next Create launches on-demand.
func TestMotoSpotExhaustedFallsBackToOnDemand(t *testing.T) {
	f := newMotoFixture(t, Options{})
	ctx := context.Background()
	f.faults.AddCapacityFault(awstest.CapacityFault{CapacityType: karpv1.CapacityTypeSpot})
	_, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	ice, ok := cloudprovider.AsInsufficientCapacity(err)
	if !ok || ice.CapacityType != karpv1.CapacityTypeSpot || ice.InstanceType == "" {
		t.Fatalf("Create = %v, want an InsufficientCapacityError naming a spot offering", err)
	}
	if fl := f.faults.Fleets(); len(fl) != 1 || fl[0].Forwarded || len(fl[0].Refused) != len(fl[0].Overrides) {
		t.Fatalf("fleet %+v: want every override refused", fl)
	}
	out, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	if err != nil {
		t.Fatal(err)
	}
	if out.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeOnDemand {
		t.Errorf("second launch is %s, want on-demand", out.Labels[karpv1.CapacityTypeLabelKey])
	}
	if fl := f.faults.Fleets(); fl[1].CapacityType != karpv1.CapacityTypeOnDemand {
		t.Errorf("second fleet asked for %s", fl[1].CapacityType)
	}
	// A NodeClaim that allows only spot now finds nothing available.
	_, err = f.p.Create(ctx, nodeClaim("1", m5Family, req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeSpot)))
	if !cloudprovider.IsInsufficientCapacity(err) {
		t.Errorf("spot-only Create = %v, want InsufficientCapacityError", err)
	}
}

// TestMotoSubnetOutOfAddresses refuses the first zone's subnet: the zone is avoided afterwards.
func TestMotoSubnetOutOfAddresses(t *testing.T) {
	f := newMotoFixture(t, Options{})
	ctx := context.Background()
	zone := f.env.PrivateSubnets[0]
	f.faults.AddCapacityFault(awstest.CapacityFault{SubnetID: zone.ID, Code: "InsufficientFreeAddressesInSubnet"})
	onlyZone := req(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, zone.Zone)
	if _, err := f.p.Create(ctx, nodeClaim("1", m5Family, onlyZone)); !cloudprovider.IsInsufficientCapacity(err) {
		t.Fatalf("Create in the full subnet's zone = %v, want InsufficientCapacityError", err)
	}
	if !f.p.unavailable.IsSubnetUnavailable(zone.ID) {
		t.Fatal("subnet not marked")
	}
	out, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	if err != nil {
		t.Fatal(err)
	}
	if out.Labels[karpv1.LabelTopologyZone] == zone.Zone {
		t.Errorf("launched in %s, whose only subnet is out of addresses", zone.Zone)
	}
	for _, o := range f.faults.Fleets()[1].Overrides {
		if o.SubnetID == zone.ID {
			t.Error("the second fleet still used the full subnet")
		}
	}
}

// TestMotoThrottlingIsRetried throttles CreateFleet twice; the SDK's retryer gets through.
func TestMotoThrottlingIsRetried(t *testing.T) {
	f := newMotoFixture(t, Options{})
	f.moto.FailNext("ec2:CreateFleet", 2, 503, "")
	if _, err := f.p.Create(context.Background(), nodeClaim("1", m5Family)); err != nil {
		t.Fatalf("Create under throttling: %v", err)
	}
	if n := f.faults.Calls()["ec2:CreateFleet"]; n != 3 {
		t.Errorf("CreateFleet sent %d times, want 3 (two throttled)", n)
	}
}

// TestMotoDrift reports AMI, security-group and subnet drift from the class's status.
func TestMotoDrift(t *testing.T) {
	f := newMotoFixture(t, Options{})
	ctx := context.Background()
	launched, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	if err != nil {
		t.Fatal(err)
	}
	// The instance is in the template's security groups (awstest's front puts them on, as EC2
	// does and moto does not), so it starts undrifted.
	check := func(want cloudprovider.DriftReason, change func(*awsv1.EC2NodeClass)) {
		t.Helper()
		nc := &awsv1.EC2NodeClass{}
		if err := f.kube.Get(ctx, clientKey("default"), nc); err != nil {
			t.Fatal(err)
		}
		stored := readyClass(f.env)
		stored.ResourceVersion = nc.ResourceVersion
		change(stored)
		status := stored.Status.DeepCopy()
		if err := f.kube.Update(ctx, stored); err != nil {
			t.Fatal(err)
		}
		stored.Status = *status // Update hands back the stored status
		if err := f.kube.Status().Update(ctx, stored); err != nil {
			t.Fatal(err)
		}
		got, err := f.p.IsDrifted(ctx, launched)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("IsDrifted = %q, want %q", got, want)
		}
	}
	check("", func(*awsv1.EC2NodeClass) {})
	check(DriftReasonSecurityGroup, func(nc *awsv1.EC2NodeClass) { nc.Status.SecurityGroups = nc.Status.SecurityGroups[:1] })
	check(DriftReasonSubnet, func(nc *awsv1.EC2NodeClass) {
		nc.Status.Subnets = slices.DeleteFunc(nc.Status.Subnets, func(s awsv1.Subnet) bool { return s.Zone == launched.Labels[karpv1.LabelTopologyZone] })
	})
	check(DriftReasonAMI, func(nc *awsv1.EC2NodeClass) { nc.Status.AMIs[0].ID = "ami-0newer" })
	check(DriftReasonNodeClass, func(nc *awsv1.EC2NodeClass) {
		nc.Annotations = map[string]string{awsv1.AnnotationEC2NodeClassHash: "2", awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}
		launched.Annotations = map[string]string{awsv1.AnnotationEC2NodeClassHash: "1", awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}
	})
	check("", func(nc *awsv1.EC2NodeClass) { // a class that is not Ready reports no drift
		nc.Status.Conditions[0].Status = "False"
		nc.Status.SecurityGroups = nil
	})
}

// TestMotoNodeClassNotReady returns a NodeClassNotReadyError until the class is Ready.
func TestMotoNodeClassNotReady(t *testing.T) {
	f := newMotoFixture(t, Options{})
	ctx := context.Background()
	nc := &awsv1.EC2NodeClass{}
	if err := f.kube.Get(ctx, clientKey("default"), nc); err != nil {
		t.Fatal(err)
	}
	nc.Status.Conditions[0].Status = "False"
	nc.Status.Conditions[0].Reason, nc.Status.Conditions[0].Message = "SubnetsNotFound", "no subnet matched"
	if err := f.kube.Status().Update(ctx, nc); err != nil {
		t.Fatal(err)
	}
	_, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	if !cloudprovider.IsNodeClassNotReady(err) || !strings.Contains(err.Error(), "SubnetsNotFound") {
		t.Errorf("Create = %v, want NodeClassNotReadyError with the reason", err)
	}
	if _, err := f.p.GetInstanceTypes(ctx, testNodePool()); !cloudprovider.IsNodeClassNotReady(err) {
		t.Errorf("GetInstanceTypes = %v, want NodeClassNotReadyError", err)
	}
	missing := nodeClaim("1")
	missing.Spec.NodeClassRef.Name = "nope"
	if _, err := f.p.Create(ctx, missing); !cloudprovider.IsNodeClassNotReady(err) {
		t.Errorf("Create with a missing class = %v, want NodeClassNotReadyError", err)
	}
	if total(f.faults.Calls()) != 0 {
		t.Errorf("calls to AWS for a class that is not ready: %v", f.faults.Calls())
	}
}

// TestMotoLaunchTemplateGC deletes templates idle longer than the TTL, and creates them again
// when needed.
func TestMotoLaunchTemplateGC(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	f := newMotoFixture(t, Options{Clock: clk})
	ctx := context.Background()
	if _, err := f.p.Create(ctx, nodeClaim("1", m5Family)); err != nil {
		t.Fatal(err)
	}
	// A template of another configuration (a different class's tags) used later.
	clk.Step(DefaultLaunchTemplateIdleTTL / 2)
	tagged := readyClass(f.env)
	tagged.Name = "tagged"
	tagged.Spec.Tags = map[string]string{"team": "search"}
	if err := f.kube.Create(ctx, tagged); err != nil {
		t.Fatal(err)
	}
	claim := nodeClaim("1", m5Family)
	claim.Spec.NodeClassRef.Name = "tagged"
	if _, err := f.p.Create(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if names := clusterTemplates(t, f); len(names) != 2 {
		t.Fatalf("templates %v, want 2", names)
	}
	if deleted, err := f.p.CollectLaunchTemplates(ctx); err != nil || len(deleted) != 0 {
		t.Fatalf("collect before the TTL deleted %v, %v", deleted, err)
	}
	clk.Step(DefaultLaunchTemplateIdleTTL/2 + time.Second)
	deleted, err := f.p.CollectLaunchTemplates(ctx)
	if err != nil || len(deleted) != 1 {
		t.Fatalf("collect after the first template's TTL deleted %v, %v; want 1", deleted, err)
	}
	if names := clusterTemplates(t, f); len(names) != 1 {
		t.Errorf("templates left %v, want 1", names)
	}
	// The default class launches again: its template is created anew.
	f.faults.ResetCalls()
	if _, err := f.p.Create(ctx, nodeClaim("1", m5Family)); err != nil {
		t.Fatal(err)
	}
	if n := f.faults.Calls()["ec2:CreateLaunchTemplate"]; n != 1 {
		t.Errorf("CreateLaunchTemplate calls %d, want 1", n)
	}
	// Deleting a class's templates (its finalizer) removes only those.
	if err := f.p.DeleteLaunchTemplates(ctx, "tagged"); err != nil {
		t.Fatal(err)
	}
	if names := clusterTemplates(t, f); len(names) != 1 {
		t.Errorf("templates left after deleting the tagged class's: %v, want the default's", names)
	}
	// A template deleted behind the provider's back is created again at the next launch.
	for _, n := range clusterTemplates(t, f) {
		if _, err := f.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(n)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.p.Create(ctx, nodeClaim("1", m5Family)); err != nil {
		t.Fatalf("Create after the template vanished: %v", err)
	}
}

// TestMotoClusterEndpointFromEKS learns the endpoint, CA and service CIDR from eks:DescribeCluster.
func TestMotoClusterEndpointFromEKS(t *testing.T) {
	f := newMotoFixture(t, Options{ClusterEndpoint: "set-below"})
	ctx := context.Background()
	eksc := newEKSClient(f)
	createEKSCluster(t, ctx, eksc, f)
	f.p.opts.ClusterEndpoint, f.p.opts.ClusterCABundle, f.p.opts.ServiceCIDR = "", "", ""
	f.p.opts.EKS = eksc
	ci := f.p.clusterInfo(ctx)
	if ci.unknown != nil {
		t.Fatal(ci.unknown)
	}
	if !strings.HasPrefix(ci.endpoint, "https://") || ci.caBundle == "" {
		t.Errorf("cluster info from EKS = %+v", ci)
	}
	if _, err := f.p.Create(ctx, nodeClaim("1", m5Family)); err != nil {
		t.Fatal(err)
	}
	if n := f.faults.Calls()["eks:GET /clusters/"+f.env.ClusterName]; n != 1 {
		t.Errorf("DescribeCluster calls %d, want 1 (cached)", n)
	}
}

type offeringRef struct {
	it, zone string
	price    float64
}

// cheapestOffering returns the cheapest available offering of the capacity type among the
// families, as GetInstanceTypes shows it.
func cheapestOffering(t *testing.T, f *motoFixture, capacityType string, families ...string) offeringRef {
	t.Helper()
	its, err := f.p.GetInstanceTypes(context.Background(), testNodePool())
	if err != nil {
		t.Fatal(err)
	}
	fam := requirements.New(requirements.In(awsv1.LabelInstanceFamily, families...), requirements.In(karpv1.CapacityTypeLabelKey, capacityType))
	var best offeringRef
	for _, it := range its {
		if _, conflict := fam.FirstConflict(it.Requirements); conflict {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Available || o.CapacityType() != capacityType {
				continue
			}
			if best.it == "" || o.Price < best.price || (o.Price == best.price && (it.Name < best.it || (it.Name == best.it && o.Zone() < best.zone))) {
				best = offeringRef{it: it.Name, zone: o.Zone(), price: o.Price}
			}
		}
	}
	if best.it == "" {
		t.Fatalf("no available %s offering of %v", capacityType, families)
	}
	return best
}

func offeringOf(t *testing.T, f *motoFixture, it, zone, capacityType string) *cloudprovider.Offering {
	t.Helper()
	its, err := f.p.GetInstanceTypes(context.Background(), testNodePool())
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range its {
		if i.Name != it {
			continue
		}
		for _, o := range i.Offerings {
			if o.Zone() == zone && o.CapacityType() == capacityType {
				return o
			}
		}
	}
	t.Fatalf("no offering %s %s %s", it, zone, capacityType)
	return nil
}

func classGroups(f *motoFixture) []string {
	return sortedStrings(f.env.NodeSecurityGroup.ID, f.env.ClusterSecurityGroup.ID)
}

func clusterTemplates(t *testing.T, f *motoFixture) []string {
	t.Helper()
	out, err := f.ec2.DescribeLaunchTemplates(context.Background(), &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:eks:eks-cluster-name"), Values: []string{f.env.ClusterName}}}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, lt := range out.LaunchTemplates {
		names = append(names, aws.ToString(lt.LaunchTemplateName))
	}
	return names
}

func providerIDs(ncs []*karpv1.NodeClaim) []string {
	var out []string
	for _, nc := range ncs {
		out = append(out, nc.Status.ProviderID)
	}
	sort.Strings(out)
	return out
}

func sortedStrings(s ...string) []string {
	slices.Sort(s)
	return s
}

func total(calls map[string]int) int {
	n := 0
	for v := range maps.Values(calls) {
		n += v
	}
	return n
}

func clientKey(name string) types.NamespacedName { return types.NamespacedName{Name: name} }

func newEKSClient(f *motoFixture) *eks.Client {
	return eks.NewFromConfig(f.faults.Apply(f.moto.Config))
}

func createEKSCluster(t *testing.T, ctx context.Context, c *eks.Client, f *motoFixture) {
	t.Helper()
	var subnets []string
	for _, s := range f.env.PrivateSubnets {
		subnets = append(subnets, s.ID)
	}
	if _, err := c.CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String(f.env.ClusterName), RoleArn: aws.String(f.env.RoleARN),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets},
	}); err != nil {
		t.Fatal(err)
	}
	f.faults.ResetCalls()
}

// TestMotoAPICallsPerNode counts the AWS calls of launching ten nodes from two NodePools (two
// launch-template configurations), and of the one-time reads of instance types and spot prices.
func TestMotoAPICallsPerNode(t *testing.T) {
	f := newMotoFixture(t, Options{})
	ctx := context.Background()
	for i := 0; i < 10; i++ {
		claim := nodeClaim("1", m5Family)
		if i%2 == 1 {
			claim.Labels[karpv1.NodePoolLabelKey] = "batch"
		}
		if _, err := f.p.Create(ctx, claim); err != nil {
			t.Fatal(err)
		}
	}
	launches := f.faults.Calls()
	t.Logf("10 launches from 2 NodePools: %d AWS calls %v (%.1f per node)", total(launches), launches, float64(total(launches))/10)
	if launches["ec2:CreateFleet"] != 10 || launches["ec2:CreateLaunchTemplate"] != 2 || total(launches) != 12 {
		t.Errorf("calls %v, want 10 CreateFleet and 2 CreateLaunchTemplate", launches)
	}
	f.faults.ResetCalls()
	if _, err := f.p.List(ctx); err != nil {
		t.Fatal(err)
	}
	listed := f.faults.Calls()
	t.Logf("List (garbage collection) of 10 instances: %v", listed)
	if total(listed) != 1 {
		t.Errorf("List made %v, want one DescribeInstances", listed)
	}
	// The reads every replica makes at start and then hourly.
	f.faults.ResetCalls()
	src := &typeSource{api: f.ec2, region: awstest.Region}
	if err := src.refresh(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := f.p.RefreshSpotPrices(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("instance-type and spot-price refresh (once at start, then hourly): %v", f.faults.Calls())
}
