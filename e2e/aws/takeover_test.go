package aws_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/nodeclaim"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/providers/aws"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/providers/aws/nodeclass"
	"github.com/joiner-dev/joiner/requirements"
	"github.com/joiner-dev/joiner/testsupport/metricstest"
)

const (
	// takeoverPool names the NodePool and EC2NodeClass Karpenter left.
	takeoverPool = "takeover"
	// takeoverType is the instance type of Karpenter's nodes; the NodePool's cpu limit is two of them.
	takeoverType = "m5.large"
	// karpenterClassHash is the EC2NodeClass hash Karpenter stamped (its algorithm, version v5), which
	// is not Joiner's.
	karpenterClassHash = "12405316862711254921"
)

// karpenterState is what Karpenter left when its controller was scaled to 0: two nodes of the
// NodePool, one running a pod and one empty, and an instance whose NodeClaim it never wrote.
type karpenterState struct {
	pool        *karpv1.NodePool
	used, empty *karpv1.NodeClaim
	instances   map[string]awstest.KarpenterInstance // by NodeClaim name; "" for the orphan
}

// TestTakeOverFromKarpenter is the migration a team makes: Karpenter's controller scaled to 0,
// Joiner started on the same cluster. What Karpenter left (NodePool, EC2NodeClass, NodeClaims
// with its finalizer, annotations and status, Nodes, instances and launch templates with its tags
// and names) is adopted: each NodeClaim gets an Adopted Event and counts in
// joiner_nodeclaims_adopted_total, the NodePool counts their resources, their instances get the
// Name and karpenter.sh/nodeclaim tags, the empty node is consolidated and its instance terminated,
// the used one is kept (not drifted, though Karpenter hashed its class differently), the instance
// without a NodeClaim is garbage collected, nothing is launched, and deleting the EC2NodeClass
// deletes Karpenter's launch template.
func TestTakeOverFromKarpenter(t *testing.T) {
	ctx := context.Background()
	waitForEC2InstanceTypes(t)
	class := takeoverNodeClass(t)
	it := typeOf(t, takeoverType)
	launch := karpenterLaunchOf(t, class, it)
	// Cleanups run last first: the app goes, Joiner runs again if the test stopped before the
	// takeover, then the NodePool and EC2NodeClass go.
	k := &karpenterState{instances: map[string]awstest.KarpenterInstance{}}
	t.Cleanup(func() { cleanUpTakeover(t, k) })
	if err := cluster.StopJoiner(ctx); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped { // a failure before the takeover must not leave the package without Joiner
			if _, err := cluster.StartJoiner(ctx); err != nil {
				t.Error(err)
			}
		}
	})
	leaveKarpenterState(t, k, class, it, launch)

	faults.ResetCalls()
	reg, err := cluster.StartJoiner(ctx)
	if err != nil {
		t.Fatal(err)
	}
	stopped = false
	start := time.Now()
	ownOnly := framework.Sample(func(ctx context.Context) string { return onlyKarpenterClaims(ctx, k) })

	for _, nc := range []*karpv1.NodeClaim{k.used, k.empty} {
		if !cluster.HasEvent(t, nc.Name, nodeclaim.ReasonAdopted, nc.Status.ProviderID) {
			t.Errorf("no %s Event on NodeClaim %s", nodeclaim.ReasonAdopted, nc.Name)
		}
	}
	framework.Eventually(t, 20*time.Second, "the NodePool to count both adopted nodes (4 cpu)", func(ctx context.Context) (bool, error) {
		np := &karpv1.NodePool{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(k.pool), np); err != nil {
			return false, nil
		}
		return np.Status.Resources.Cpu().Cmp(resource.MustParse("4")) == 0, nil
	})
	adopted := time.Since(start)
	waitTagged(t, k)
	framework.Eventually(t, 90*time.Second, "the empty node to be consolidated and its instance terminated", func(ctx context.Context) (bool, error) {
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(k.empty), &karpv1.NodeClaim{}); err == nil {
			return false, nil
		}
		live, err := liveInstances(ctx, ec2c, account.ClusterName)
		_, running := live[k.empty.Status.ProviderID]
		return err == nil && !running, nil
	})
	consolidated := time.Since(start)
	framework.Eventually(t, 90*time.Second, "garbage collection to terminate the instance without a NodeClaim", func(ctx context.Context) (bool, error) {
		live, err := liveInstances(ctx, ec2c, account.ClusterName)
		return err == nil && slices.Equal(slices.Collect(maps.Keys(live)), []string{k.used.Status.ProviderID}), nil
	})
	collected := time.Since(start)
	ownOnly.Finish(t, "only Karpenter's NodeClaims, the used one never drifted nor deleted")
	checkKeptUsedNode(t, k)
	if n := faults.Calls()["ec2:CreateFleet"]; n != 0 {
		t.Errorf("Joiner called CreateFleet %d times after taking over; want none", n)
	}
	if got := metricstest.Sum(t, reg, "joiner_nodeclaims_adopted_total", map[string]string{"nodepool": takeoverPool}); got != 2 {
		t.Errorf("joiner_nodeclaims_adopted_total{nodepool=%s} = %v, want 2", takeoverPool, got)
	}
	t.Logf("takeover: both NodeClaims adopted and counted %s after Joiner started, the empty node gone %s, the orphaned instance %s",
		adopted.Round(10*time.Millisecond), consolidated.Round(10*time.Millisecond), collected.Round(10*time.Millisecond))
}

// takeoverNodeClass creates the EC2NodeClass as the getting-started guide writes it and waits
// until Joiner has resolved it (Karpenter's status would say the same).
func takeoverNodeClass(t *testing.T) *awsv1.EC2NodeClass {
	t.Helper()
	discovery := map[string]string{awstest.DiscoveryTag: account.ClusterName}
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: takeoverPool}, Spec: awsv1.EC2NodeClassSpec{
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: discovery}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: discovery}},
		Role:                       account.RoleName,
		Tags:                       map[string]string{"team": "payments"},
	}}
	if err := cluster.Client.Create(context.Background(), nc); err != nil {
		t.Fatalf("create EC2NodeClass %s: %v", nc.Name, err)
	}
	framework.Eventually(t, time.Minute, "EC2NodeClass "+nc.Name+" to be Ready", func(ctx context.Context) (bool, error) {
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
			return false, nil
		}
		return meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionTypeReady), nil
	})
	return nc
}

// leaveKarpenterState writes, while Joiner is stopped, what Karpenter leaves: its hash on the
// EC2NodeClass, the NodePool, three instances launched as Karpenter launches them, the NodeClaims
// and Nodes of two of them, and a pod on one.
func leaveKarpenterState(t *testing.T, k *karpenterState, class *awsv1.EC2NodeClass, it *cloudprovider.InstanceType, launch awstest.KarpenterLaunch) {
	t.Helper()
	ctx := context.Background()
	stored := class.DeepCopy()
	class.Annotations = map[string]string{awsv1.AnnotationEC2NodeClassHash: karpenterClassHash,
		awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion, awsv1.AnnotationInstanceProfile: class.Status.InstanceProfile}
	if err := cluster.Client.Patch(ctx, class, client.MergeFrom(stored)); err != nil {
		t.Fatalf("stamp Karpenter's hash on EC2NodeClass %s: %v", class.Name, err)
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: takeoverPool}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: aws.NodeClassKind, Name: class.Name}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		framework.Req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeOnDemand),
		framework.Req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, takeoverType),
	}
	np.Spec.Template.Spec.ExpireAfter = karpv1.NewNillableDuration(720 * time.Hour)
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmpty
	np.Spec.Disruption.ConsolidateAfter = karpv1.NewNillableDuration(15 * time.Second)
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	// Karpenter's NodePool hash is Joiner's (pinned in api/karpenter/v1).
	np.Annotations = map[string]string{karpv1.NodePoolHashAnnotationKey: np.Hash(), karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion}
	if err := cluster.Client.Create(ctx, np); err != nil {
		t.Fatalf("create NodePool %s: %v", np.Name, err)
	}
	k.pool = np
	for _, name := range []string{"takeover-x7k2p", "takeover-q9m4d", ""} {
		inst, err := awstest.LaunchAsKarpenter(ctx, ec2c, launch)
		if err != nil {
			t.Fatal(err)
		}
		k.instances[name] = inst
		if name == "" {
			continue // launched, then Karpenter stopped before it wrote the NodeClaim
		}
		nc := writeKarpenterNodeClaim(t, np, class, it, name, inst, launch.Zone)
		if k.used == nil {
			k.used = nc
		} else {
			k.empty = nc
		}
	}
	runPodOn(t, k.used.Status.NodeName)
}

// karpenterLaunchOf places Karpenter's instances of type it: the first subnet and the class's
// security groups, instance profile and the AMI that serves the type.
func karpenterLaunchOf(t *testing.T, class *awsv1.EC2NodeClass, it *cloudprovider.InstanceType) awstest.KarpenterLaunch {
	t.Helper()
	labels := it.Requirements.Labels()
	image := ""
	for _, a := range class.Status.AMIs {
		reqs, err := requirements.FromNodeSelectorRequirements(a.Requirements...)
		if err != nil {
			t.Fatal(err)
		}
		if _, conflict := requirements.FromLabels(labels).FirstConflict(reqs); !conflict {
			image = a.ID
			break
		}
	}
	if image == "" {
		t.Fatalf("no AMI of EC2NodeClass %s serves %s: %+v", class.Name, takeoverType, class.Status.AMIs)
	}
	var groups []string
	for _, sg := range class.Status.SecurityGroups {
		groups = append(groups, sg.ID)
	}
	subnet := class.Status.Subnets[0]
	return awstest.KarpenterLaunch{ClusterName: account.ClusterName, NodePool: takeoverPool, NodeClass: class.Name,
		InstanceType: it.Name, Zone: subnet.Zone, SubnetID: subnet.ID, ImageID: image,
		SecurityGroupIDs: groups, InstanceProfile: class.Status.InstanceProfile, Tags: class.Spec.Tags}
}

// typeOf returns the instance type as the provider builds it for the NodePool's class.
func typeOf(t *testing.T, name string) *cloudprovider.InstanceType {
	t.Helper()
	np := &karpv1.NodePool{}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: aws.NodeClassKind, Name: takeoverPool}
	its, err := awsProvider().GetInstanceTypes(context.Background(), np)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if it.Name == name {
			return it
		}
	}
	t.Fatalf("the provider does not build %s", name)
	return nil
}

// writeKarpenterNodeClaim writes the NodeClaim of the instance and its Node as Karpenter leaves
// them once the Node registered and initialized: Karpenter's labels, hashes, finalizer, owner and
// status, and a Node named as EC2 names it, owned by the NodeClaim, with Karpenter's finalizer.
func writeKarpenterNodeClaim(t *testing.T, np *karpv1.NodePool, class *awsv1.EC2NodeClass, it *cloudprovider.InstanceType,
	name string, inst awstest.KarpenterInstance, zone string) *karpv1.NodeClaim {
	t.Helper()
	ctx := context.Background()
	labels := it.Requirements.Labels()
	maps.Copy(labels, map[string]string{karpv1.NodePoolLabelKey: np.Name, awsv1.LabelNodeClass: class.Name, karpv1.LabelTopologyZone: zone,
		karpv1.LabelTopologyRegion: awstest.Region, karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeOnDemand})
	for _, s := range class.Status.Subnets {
		if s.Zone == zone {
			labels[awsv1.LabelTopologyZoneID] = s.ZoneID
		}
	}
	nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
		Annotations: map[string]string{
			awsv1.AnnotationEC2NodeClassHash: karpenterClassHash, awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion,
			karpv1.NodePoolHashAnnotationKey: np.Hash(), karpv1.NodePoolHashVersionAnnotationKey: karpv1.NodePoolHashVersion,
		},
		Finalizers:      []string{karpv1.TerminationFinalizer},
		OwnerReferences: []metav1.OwnerReference{np.OwnerReference()},
	}}
	nc.Spec.NodeClassRef = np.Spec.Template.Spec.NodeClassRef
	nc.Spec.Requirements = np.Spec.Template.Spec.Requirements
	nc.Spec.ExpireAfter = np.Spec.Template.Spec.ExpireAfter
	nc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}
	if err := cluster.Client.Create(ctx, nc); err != nil {
		t.Fatalf("create NodeClaim %s: %v", name, err)
	}
	nc.Status = karpv1.NodeClaimStatus{ProviderID: inst.ProviderID, ImageID: karpenterImage(t, inst.InstanceID),
		Capacity: it.Capacity.DeepCopy(), Allocatable: it.Allocatable().DeepCopy(), LastPodEventTime: metav1.Now()}
	node := nodeFor(inst.InstanceID, inst.ProviderID, nc)
	node.Spec.Taints = nil
	node.Finalizers = []string{karpv1.TerminationFinalizer}
	node.Labels[karpv1.NodeRegisteredLabelKey] = "true"
	node.Labels[karpv1.NodeInitializedLabelKey] = "true"
	node.OwnerReferences = []metav1.OwnerReference{{APIVersion: karpv1.GroupVersion.String(), Kind: "NodeClaim", Name: nc.Name, UID: nc.UID,
		BlockOwnerDeletion: awssdk.Bool(true)}}
	if err := cluster.Client.Create(ctx, node); err != nil {
		t.Fatalf("create Node %s: %v", node.Name, err)
	}
	nc.Status.NodeName = node.Name
	for _, c := range []string{karpv1.ConditionTypeLaunched, karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeReady} {
		nc.SetCondition(time.Now(), c, metav1.ConditionTrue, c, "")
	}
	if err := cluster.Client.Status().Update(ctx, nc); err != nil {
		t.Fatalf("write the status of NodeClaim %s: %v", name, err)
	}
	return nc
}

// karpenterImage returns the AMI the instance runs.
func karpenterImage(t *testing.T, id string) string {
	t.Helper()
	out, err := ec2c.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(out.Reservations) == 0 || len(out.Reservations[0].Instances) == 0 {
		t.Fatalf("describe instance %s: %v", id, err)
	}
	return awssdk.ToString(out.Reservations[0].Instances[0].ImageId)
}

// runPodOn runs one pod of the NodePool on the Node, through the scheduler.
func runPodOn(t *testing.T, node string) {
	t.Helper()
	cluster.Deployment(t, "takeover-app", takeoverPool, 1, "500m", func(spec *corev1.PodSpec) {
		spec.NodeSelector[corev1.LabelHostname] = node
	})
	cluster.WaitRunning(t, "takeover-app", 1, time.Minute)
}

// waitTagged waits until the instances of both NodeClaims carry the tags Karpenter's tagging
// adds after registration, and the kept NodeClaim is marked tagged.
func waitTagged(t *testing.T, k *karpenterState) {
	t.Helper()
	for _, nc := range []*karpv1.NodeClaim{k.used, k.empty} {
		inst := k.instances[nc.Name]
		framework.Eventually(t, 30*time.Second, "the instance of "+nc.Name+" to be tagged", func(ctx context.Context) (bool, error) {
			tags, err := awstest.InstanceTags(ctx, ec2c, inst.InstanceID)
			return err == nil && tags[awsv1.TagName] == nc.Status.NodeName && tags[awsv1.TagNodeClaim] == nc.Name, nil
		})
	}
	framework.Eventually(t, 30*time.Second, "NodeClaim "+k.used.Name+" to be marked tagged", func(ctx context.Context) (bool, error) {
		got := &karpv1.NodeClaim{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(k.used), got); err != nil {
			return false, nil
		}
		return got.Annotations[awsv1.AnnotationClaimTagged] == "true" && got.Annotations[aws.AnnotationClusterNameTagged] == "true", nil
	})
}

// onlyKarpenterClaims returns a violation when the NodePool has a NodeClaim Karpenter did not
// leave, or the used one is deleted or drifted.
func onlyKarpenterClaims(ctx context.Context, k *karpenterState) string {
	list := &karpv1.NodeClaimList{}
	if err := cluster.Client.List(ctx, list, client.MatchingLabels{karpv1.NodePoolLabelKey: takeoverPool}); err != nil {
		return ""
	}
	for _, nc := range list.Items {
		switch {
		case nc.Name != k.used.Name && nc.Name != k.empty.Name:
			return fmt.Sprintf("NodeClaim %s was created after the takeover", nc.Name)
		case nc.Name == k.used.Name && nc.DeletionTimestamp != nil:
			return fmt.Sprintf("the used node's NodeClaim %s is being deleted", nc.Name)
		case nc.Name == k.used.Name && meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeDrifted):
			return fmt.Sprintf("the used node's NodeClaim %s drifted: %+v", nc.Name, meta.FindStatusCondition(nc.Status.Conditions, karpv1.ConditionTypeDrifted))
		}
	}
	return ""
}

// checkKeptUsedNode checks the used node after the takeover: adopted, re-stamped with Joiner's
// EC2NodeClass hash (so not drifted), its pod still running.
func checkKeptUsedNode(t *testing.T, k *karpenterState) {
	t.Helper()
	nc := &karpv1.NodeClaim{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(k.used), nc); err != nil {
		t.Fatalf("the used node's NodeClaim: %v", err)
	}
	if got := nc.Annotations[nodeclaim.OriginAnnotationKey]; got != nodeclaim.OriginAdopted {
		t.Errorf("NodeClaim %s: %s=%q, want %q", nc.Name, nodeclaim.OriginAnnotationKey, got, nodeclaim.OriginAdopted)
	}
	if v, h := nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion], nc.Annotations[awsv1.AnnotationEC2NodeClassHash]; v != nodeclass.HashVersion || h == karpenterClassHash {
		t.Errorf("NodeClaim %s: EC2NodeClass hash %s version %s, want Joiner's hash under version %s", nc.Name, h, v, nodeclass.HashVersion)
	}
	pods := cluster.Pods(t, "takeover-app")
	if len(pods) != 1 || pods[0].Status.Phase != corev1.PodRunning || pods[0].Spec.NodeName != k.used.Status.NodeName {
		t.Errorf("the pod on the used node: %d pods, want 1 running on %s", len(pods), k.used.Status.NodeName)
	}
}

// cleanUpTakeover deletes the NodePool (and so, through termination, the NodeClaims and their
// instances) and the EC2NodeClass, whose finalizer deletes the launch templates of the class,
// Karpenter's included; an instance left over (the test failed early) is terminated.
func cleanUpTakeover(t *testing.T, k *karpenterState) {
	ctx := context.Background()
	if k.pool != nil {
		if err := cluster.Client.Delete(ctx, k.pool); client.IgnoreNotFound(err) != nil {
			t.Errorf("delete NodePool %s: %v", k.pool.Name, err)
		}
		framework.Eventually(t, 2*time.Minute, "the NodeClaims of "+takeoverPool+" to be gone", func(ctx context.Context) (bool, error) {
			return len(cluster.NodeClaims(t, takeoverPool)) == 0, nil
		})
	}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: takeoverPool}}
	if err := cluster.Client.Delete(ctx, class); client.IgnoreNotFound(err) != nil {
		t.Errorf("delete EC2NodeClass %s: %v", class.Name, err)
	}
	framework.Eventually(t, time.Minute, "EC2NodeClass "+class.Name+" to be gone", func(ctx context.Context) (bool, error) {
		return cluster.Client.Get(ctx, client.ObjectKeyFromObject(class), class) != nil, nil
	})
	var leftover []string
	for _, inst := range k.instances {
		leftover = append(leftover, inst.InstanceID)
		if _, err := ec2c.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{inst.LaunchTemplate}}); err == nil {
			t.Errorf("Karpenter's launch template %s outlived its EC2NodeClass", inst.LaunchTemplate)
		}
	}
	if len(leftover) > 0 {
		_, _ = ec2c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: leftover})
	}
}
