package aws

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/client-go/tools/events"
	testingclock "k8s.io/utils/clock/testing"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/garbagecollection"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
)

// karpenterLaunch is an m5.large of the fixture's cluster launched as Karpenter launches it, for
// the EC2NodeClass class.
func karpenterLaunch(f *motoFixture, class string) awstest.KarpenterLaunch {
	return awstest.KarpenterLaunch{
		ClusterName: f.env.ClusterName, NodePool: "default", NodeClass: class,
		InstanceType: "m5.large", Zone: f.env.PrivateSubnets[0].Zone, SubnetID: f.env.PrivateSubnets[0].ID,
		ImageID: f.env.CustomAMIs[0].ID, SecurityGroupIDs: classGroups(f), InstanceProfile: f.env.InstanceProfileName,
		Tags: map[string]string{"team": "payments"},
	}
}

func launchAsKarpenter(t *testing.T, f *motoFixture, k awstest.KarpenterLaunch) awstest.KarpenterInstance {
	t.Helper()
	// Straight to moto: these calls are Karpenter's, not the provider's.
	inst, err := awstest.LaunchAsKarpenter(context.Background(), ec2.NewFromConfig(f.moto.Config), k)
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// TestMotoKarpenterResourcesAreAdopted: the instances and launch templates Karpenter left in the
// cluster count as the provider's. List returns Karpenter's instances of the cluster (not another
// cluster's); garbage collection keeps the one a NodeClaim names and terminates the one none
// does; Karpenter's launch templates of the cluster go with their EC2NodeClass and when unused
// past the idle TTL, another cluster's never.
func TestMotoKarpenterResourcesAreAdopted(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	f := newMotoFixture(t, Options{Clock: clk})
	ctx := context.Background()
	claimed := launchAsKarpenter(t, f, karpenterLaunch(f, "default"))
	orphan := launchAsKarpenter(t, f, karpenterLaunch(f, "default"))
	otherClass := launchAsKarpenter(t, f, karpenterLaunch(f, "other"))
	foreign := karpenterLaunch(f, "default")
	foreign.ClusterName = f.env.ClusterName + "-elsewhere"
	foreign.Tags = map[string]string{"team": "elsewhere"} // another template
	foreignInst := launchAsKarpenter(t, f, foreign)

	nc := nodeClaim("1", m5Family)
	nc.Status.ProviderID = claimed.ProviderID
	for _, c := range []*karpv1.NodeClaim{nc, nodeClaimOf(otherClass.ProviderID)} {
		status := c.Status
		if err := f.kube.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		c.Status = status
		if err := f.kube.Status().Update(ctx, c); err != nil {
			t.Fatal(err)
		}
	}

	listed, err := f.p.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := sortedStrings(claimed.ProviderID, orphan.ProviderID, otherClass.ProviderID)
	if got := providerIDs(listed); !slices.Equal(got, want) {
		t.Errorf("List = %v, want Karpenter's instances of the cluster %v", got, want)
	}

	clk.Step(time.Minute) // past garbage collection's grace period
	gc, err := garbagecollection.NewController(f.kube, f.kube, f.p, clk, events.NewFakeRecorder(10), nil, garbagecollection.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gc.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	for id, wantLive := range map[string]bool{claimed.ProviderID: true, otherClass.ProviderID: true, orphan.ProviderID: false} {
		if _, err := f.p.Get(ctx, id); (err == nil) != wantLive {
			t.Errorf("after garbage collection, instance %s live: %t, want %t", id, err == nil, wantLive)
		}
	}
	if _, err := awstest.InstanceTags(ctx, f.ec2, foreignInst.InstanceID); err != nil {
		t.Errorf("another cluster's instance: %v", err)
	}

	// Templates: the other class's goes with it, the default class's when unused.
	if err := f.p.DeleteLaunchTemplates(ctx, "other"); err != nil {
		t.Fatal(err)
	}
	if got, want := clusterTemplates(t, f), []string{claimed.LaunchTemplate}; !slices.Equal(got, want) {
		t.Errorf("templates after deleting class other's: %v, want %v", got, want)
	}
	clk.Step(DefaultLaunchTemplateIdleTTL)
	deleted, err := f.p.CollectLaunchTemplates(ctx)
	if err != nil || !slices.Equal(deleted, []string{claimed.LaunchTemplate}) {
		t.Errorf("collect deleted %v (%v), want Karpenter's unused template %s", deleted, err, claimed.LaunchTemplate)
	}
	if _, err := f.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{foreignInst.LaunchTemplate}}); err != nil {
		t.Errorf("another cluster's Karpenter template: %v", err)
	}
}

// nodeClaimOf is a NodeClaim of the default NodePool naming the instance.
func nodeClaimOf(providerID string) *karpv1.NodeClaim {
	nc := nodeClaim("1", m5Family)
	nc.Status.ProviderID = providerID
	return nc
}

// TestJoinerLeavesWhatKarpenterNeedsToAdopt is the way back: everything Karpenter v1 reads to
// take over a NodeClaim, its instance and its launch template, Joiner writes.
// The lists are the reference's (karpenter-aws.md §1.6 and §2.2): the launch tags of
// utils.GetTags; the tags the instance provider's List filters by (karpenter.sh/nodepool,
// karpenter.k8s.aws/ec2nodeclass, kubernetes.io/cluster/<cluster>); the tags the tagging controller
// adds after registration (Name, karpenter.sh/nodeclaim); the launch-template tags its cache
// hydration and EC2NodeClass deletion filter by (eks:eks-cluster-name,
// karpenter.k8s.aws/ec2nodeclass); the NodeClaim annotations of drift and tagging. The hash
// version must differ from Karpenter's, so that Karpenter re-stamps rather than drifts.
func TestJoinerLeavesWhatKarpenterNeedsToAdopt(t *testing.T) {
	f := newMotoFixture(t, Options{})
	ctx := context.Background()
	launched, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	if err != nil {
		t.Fatal(err)
	}
	nc := registered(t, f, launched, "ip-10-0-1-17.ec2.internal")
	tg := newTagger(f.kube, f.p, testingclock.NewFakeClock(time.Now()), discard())
	tg.interval = 0
	reconcileTagger(t, tg, nc.Name)
	if err := f.kube.Get(ctx, clientKey(nc.Name), nc); err != nil {
		t.Fatal(err)
	}
	id, err := ParseProviderID(nc.Status.ProviderID)
	if err != nil || nc.Status.ProviderID != ProviderID(nc.Labels[karpv1.LabelTopologyZone], id) {
		t.Errorf("provider ID %q is not aws:///<zone>/<instance> (%v)", nc.Status.ProviderID, err)
	}
	tags, err := awstest.InstanceTags(ctx, f.ec2, id)
	if err != nil {
		t.Fatal(err)
	}
	cluster := f.env.ClusterName
	checkEntries(t, "instance tag", tags, map[string]string{
		awsv1.TagKubernetesClusterPrefix + cluster: "owned", awsv1.TagNodePool: "default", awsv1.TagEKSClusterName: cluster,
		awsv1.TagNodeClass: "default", awsv1.TagName: nc.Status.NodeName, awsv1.TagNodeClaim: nc.Name,
	})
	lts, err := f.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + awsv1.TagEKSClusterName), Values: []string{cluster}}}})
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, lt := range lts.LaunchTemplates {
		ltTags := map[string]string{}
		for _, tag := range lt.Tags {
			ltTags[aws.ToString(tag.Key)] = aws.ToString(tag.Value)
		}
		if ltTags[awsv1.TagEKSClusterName] == cluster {
			found++
			checkEntries(t, "launch template "+aws.ToString(lt.LaunchTemplateName)+" tag", ltTags,
				map[string]string{awsv1.TagEKSClusterName: cluster, awsv1.TagNodeClass: "default"})
		}
	}
	if found == 0 {
		t.Errorf("no launch template tagged %s=%s", awsv1.TagEKSClusterName, cluster)
	}
	checkEntries(t, "nodeclaim annotation", nc.Annotations, map[string]string{
		awsv1.AnnotationClaimTagged: "true", AnnotationClusterNameTagged: "true",
		awsv1.AnnotationEC2NodeClassHash:        launched.Annotations[awsv1.AnnotationEC2NodeClassHash],
		awsv1.AnnotationEC2NodeClassHashVersion: launched.Annotations[awsv1.AnnotationEC2NodeClassHashVersion],
	})
	if h := nc.Annotations[awsv1.AnnotationEC2NodeClassHash]; h == "" {
		t.Errorf("no %s annotation", awsv1.AnnotationEC2NodeClassHash)
	}
	if v := nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion]; v == "" || v == awsv1.EC2NodeClassHashVersion {
		t.Errorf("%s = %q: want Joiner's own version, not empty nor Karpenter's %s", awsv1.AnnotationEC2NodeClassHashVersion, v, awsv1.EC2NodeClassHashVersion)
	}
	checkEntries(t, "nodeclaim label", nc.Labels, map[string]string{karpv1.NodePoolLabelKey: "default", awsv1.LabelNodeClass: "default"})
	for _, k := range []string{karpv1.LabelInstanceType, karpv1.LabelTopologyZone, karpv1.CapacityTypeLabelKey} {
		if nc.Labels[k] == "" {
			t.Errorf("nodeclaim has no %s label", k)
		}
	}
}

func checkEntries(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s %s = %q (present %t), want %q", what, k, g, ok, v)
		}
	}
}
