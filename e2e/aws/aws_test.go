package aws_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/providers/aws"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/requirements"
)

const (
	poolName = "default"
	app      = "inflate"
	// consolidateAfter of the NodePool: short, so that empty nodes go quickly.
	consolidateAfter = 5 * time.Second
)

// offering is an instance type in a zone, bought as spot.
type offering struct{ instanceType, zone string }

func (o offering) String() string { return o.instanceType + " in " + o.zone }

func offeringOf(nc karpv1.NodeClaim) offering {
	return offering{nc.Labels[karpv1.LabelInstanceType], nc.Labels[karpv1.LabelTopologyZone]}
}

// TestAWSProviderOnLocalCluster is the story of a cluster on the AWS provider: the EC2NodeClass
// resolves against the account, pending pods get EC2 instances, a pool without capacity is routed
// around, a spot interruption replaces its node before the instance is reclaimed, and when the
// pods go, so do the instances.
func TestAWSProviderOnLocalCluster(t *testing.T) {
	defer describeState(t)
	waitForEC2InstanceTypes(t)
	createNodeClass(t)
	np := createNodePool(t)
	// Each pod asks for 1 CPU; a 2-vCPU node has 1930m allocatable, so every pod takes a node.
	cluster.Deployment(t, app, poolName, 0, "1", nil)

	// Scale-up: 10 pending pods become 10 instances and 10 running pods.
	faults.ResetCalls()
	providerBefore := providerCalls(t)
	toInstances, toPods := scaleAndWait(t, 10)
	calls := faults.Calls()
	t.Logf("10 pods: %d instances running %s after the pods were created, the pods running after %s",
		10, toInstances.Round(10*time.Millisecond), toPods.Round(10*time.Millisecond))
	logCallsPerNode(t, "scale-up to 10 pods", calls, 10)
	logProviderCalls(t, "scale-up to 10 pods", providerBefore)
	if calls["ec2:CreateFleet"] != 10 {
		t.Errorf("10 nodes took %d CreateFleet calls, want one each", calls["ec2:CreateFleet"])
	}
	claims := framework.Live(cluster.NodeClaims(t, poolName))
	if len(claims) != 10 {
		t.Fatalf("%d NodeClaims for 10 one-node pods, want 10", len(claims))
	}
	for _, nc := range claims {
		if nc.Labels[karpv1.CapacityTypeLabelKey] != karpv1.CapacityTypeSpot || nc.Labels[awsv1.LabelInstanceCPU] != "2" ||
			!strings.HasPrefix(nc.Status.ProviderID, aws.ProviderIDPrefix) {
			t.Errorf("NodeClaim %s: labels %v, provider ID %s; want a 2-vCPU spot EC2 instance", nc.Name, nc.Labels, nc.Status.ProviderID)
		}
	}

	// Capacity error: the cheapest spot offering, the one the 10 nodes run on, has no capacity
	// left; the next node goes to the next cheapest.
	cheapest := cheapestSpotOffering(t, np)
	if used := offeringsOf(claims); !slices.Contains(used, cheapest) {
		t.Fatalf("the nodes run on %v, not on the cheapest spot offering %s", used, cheapest)
	}
	faults.AddCapacityFault(awstest.CapacityFault{InstanceType: cheapest.instanceType, Zone: cheapest.zone, CapacityType: karpv1.CapacityTypeSpot})
	before := names(claims)
	scaleAndWait(t, 11)
	routed := newClaims(t, before)
	if len(routed) != 1 {
		t.Fatalf("scaling to 11 pods added %d NodeClaims, want 1", len(routed))
	}
	second := offeringOf(routed[0])
	if second == cheapest {
		t.Fatalf("NodeClaim %s launched on %s, which has no capacity", routed[0].Name, cheapest)
	}
	if !refused(cheapest) {
		t.Errorf("no CreateFleet asked for %s and was refused: %+v", cheapest, faults.Fleets())
	}
	if available(t, np, cheapest) {
		t.Errorf("%s is still offered as available after EC2 refused it", cheapest)
	}
	t.Logf("with %s refused for lack of capacity, NodeClaim %s launched on %s", cheapest, routed[0].Name, second)

	// Spot interruption: EC2 warns that it reclaims the node on the second offering. Joiner
	// deletes its NodeClaim ahead of the reclaim, marks the offering unavailable, and the pod gets
	// a node elsewhere.
	interrupted := routed[0]
	instanceID, err := aws.ParseProviderID(interrupted.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	before = names(framework.Live(cluster.NodeClaims(t, poolName)))
	sent := time.Now()
	sendEvent(t, "EC2 Spot Instance Interruption Warning", fmt.Sprintf(`{"instance-id":%q,"instance-action":"terminate"}`, instanceID))
	framework.Eventually(t, time.Minute, "the interrupted NodeClaim to be gone and its pod to run on a replacement", func(ctx context.Context) (bool, error) {
		got := &karpv1.NodeClaim{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(&interrupted), got); err == nil {
			return false, nil
		}
		return running(t) == 11, nil
	})
	replaced := time.Since(sent)
	if !cluster.HasEvent(t, interrupted.Name, "SpotInterrupted", "spot interruption warning") {
		t.Errorf("no SpotInterrupted Event on NodeClaim %s", interrupted.Name)
	}
	if available(t, np, second) {
		t.Errorf("the interrupted spot offering %s is still available", second)
	}
	waitQueueEmpty(t)
	replacement := newClaims(t, before)
	if len(replacement) != 1 {
		t.Fatalf("the interruption added %d NodeClaims, want 1 replacement", len(replacement))
	}
	if got := offeringOf(replacement[0]); got == cheapest || got == second {
		t.Errorf("the replacement %s launched on %s, an offering without capacity", replacement[0].Name, got)
	}
	if live := liveIDs(t); slices.Contains(live, instanceID) {
		t.Errorf("the interrupted instance %s is still running", instanceID)
	}
	t.Logf("spot interruption of %s (%s): NodeClaim deleted, replacement %s on %s, the pod running again %s after the message",
		instanceID, second, replacement[0].Name, offeringOf(replacement[0]), replaced.Round(10*time.Millisecond))

	// Scale-up to 100 pods: 89 more nodes.
	faults.ResetCalls()
	providerBefore = providerCalls(t)
	toInstances, toPods = scaleAndWait(t, 100)
	calls = faults.Calls()
	t.Logf("11 to 100 pods: %d more instances running %s after the pods were created, the pods running after %s",
		89, toInstances.Round(10*time.Millisecond), toPods.Round(10*time.Millisecond))
	logCallsPerNode(t, "scale-up from 11 to 100 pods", calls, 89)
	logProviderCalls(t, "scale-up from 11 to 100 pods", providerBefore)
	assertNoInstanceWithoutNodeClaim(t)

	// Scale-down: consolidation deletes the empty nodes, and their instances are terminated.
	start := time.Now()
	cluster.Scale(t, app, 0)
	framework.Eventually(t, 2*time.Minute, "every NodeClaim and instance to be gone", func(ctx context.Context) (bool, error) {
		if len(cluster.NodeClaims(t, poolName)) > 0 {
			return false, nil
		}
		live, err := liveInstances(ctx, ec2c, account.ClusterName)
		return err == nil && len(live) == 0, nil
	})
	t.Logf("scale-down from 100 pods: every NodeClaim and instance gone %s after scaling to 0", time.Since(start).Round(10*time.Millisecond))
	assertNoInstanceWithoutNodeClaim(t)
}

// waitForEC2InstanceTypes waits until the provider has read the instance types from moto rather
// than the embedded catalog, so that the offerings do not change under the test.
func waitForEC2InstanceTypes(t *testing.T) {
	t.Helper()
	framework.Eventually(t, time.Minute, "the provider to read moto's instance types", func(context.Context) (bool, error) {
		p := awsProvider()
		return p != nil && p.InstanceTypeSource() == aws.TypeSourceEC2, nil
	})
}

// createNodeClass creates the EC2NodeClass "default" as the getting-started guide does (the AL2023
// alias, subnets and security groups by discovery tag, a node role) and waits until it is Ready.
func createNodeClass(t *testing.T) {
	t.Helper()
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: poolName}}
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
	nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{awstest.DiscoveryTag: account.ClusterName}}}
	nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{awstest.DiscoveryTag: account.ClusterName}}}
	nc.Spec.Role = account.RoleName
	if err := cluster.Client.Create(context.Background(), nc); err != nil {
		t.Fatalf("create EC2NodeClass: %v", err)
	}
	framework.Eventually(t, time.Minute, "the EC2NodeClass to be Ready", func(ctx context.Context) (bool, error) {
		got := &awsv1.EC2NodeClass{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(nc), got); err != nil {
			return false, nil
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, awsv1.ConditionTypeReady), nil
	})
	got := &awsv1.EC2NodeClass{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKeyFromObject(nc), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Subnets) != len(awstest.Zones) || len(got.Status.SecurityGroups) != 2 || len(got.Status.AMIs) == 0 || got.Status.InstanceProfile == "" {
		t.Fatalf("EC2NodeClass status %+v: want the 3 private subnets, the 2 tagged security groups, AL2023 AMIs and an instance profile", got.Status)
	}
}

// createNodePool creates the NodePool "default" of 2-vCPU c and m spot instances (of the
// families the catalog prices) on the
// EC2NodeClass, consolidating empty and underutilized nodes after consolidateAfter, and waits
// until it is Ready. The test's end checks that its NodeClaims are gone.
func createNodePool(t *testing.T) *karpv1.NodePool {
	t.Helper()
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: poolName}}
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: aws.NodeClassKind, Name: poolName}
	np.Spec.Template.Spec.Requirements = []karpv1.NodeSelectorRequirementWithMinValues{
		framework.Req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, karpv1.CapacityTypeSpot),
		// Families the embedded catalog prices: moto's spot prices are placeholders, so the
		// catalog's zonal spot prices rank the offerings.
		framework.Req(awsv1.LabelInstanceFamily, corev1.NodeSelectorOpIn, "c5", "c5a", "c6a", "c6i", "m5", "m5a", "m6a", "m6i"),
		framework.Req(awsv1.LabelInstanceCPU, corev1.NodeSelectorOpIn, "2"),
		framework.Req(corev1.LabelArchStable, corev1.NodeSelectorOpIn, karpv1.ArchitectureAmd64),
	}
	np.Spec.Disruption.ConsolidationPolicy = karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized
	np.Spec.Disruption.ConsolidateAfter = karpv1.NewNillableDuration(consolidateAfter)
	np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "100%"}}
	if err := cluster.Client.Create(context.Background(), np); err != nil {
		t.Fatalf("create NodePool: %v", err)
	}
	framework.Eventually(t, time.Minute, "the NodePool to be Ready", func(ctx context.Context) (bool, error) {
		got := &karpv1.NodePool{}
		if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(np), got); err != nil {
			return false, nil
		}
		*np = *got
		return meta.IsStatusConditionTrue(got.Status.Conditions, karpv1.ConditionTypeReady), nil
	})
	return np
}

// scaleAndWait scales the app to n pods and waits until n instances and n pods run. It returns how
// long after the scale the instances ran in moto, and the pods ran.
func scaleAndWait(t *testing.T, n int) (toInstances, toPods time.Duration) {
	t.Helper()
	start := time.Now()
	cluster.Scale(t, app, int32(n))
	timeout := 90 * time.Second
	framework.Eventually(t, timeout, fmt.Sprintf("%d running instances", n), func(ctx context.Context) (bool, error) {
		live, err := liveInstances(ctx, ec2c, account.ClusterName)
		return err == nil && len(live) >= n, nil
	})
	toInstances = time.Since(start)
	framework.Eventually(t, timeout, fmt.Sprintf("%d running pods", n), func(context.Context) (bool, error) {
		return running(t) == n, nil
	})
	return toInstances, time.Since(start)
}

// describeState logs, when the test failed, what the cluster and moto hold: pods by phase and
// scheduling condition, NodeClaims by lifecycle condition, Nodes and instances.
func describeState(t *testing.T) {
	t.Helper()
	if !t.Failed() {
		return
	}
	ctx := context.Background()
	pods := map[string]int{}
	for _, p := range cluster.Pods(t, app) {
		key := string(p.Status.Phase)
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status != corev1.ConditionTrue {
				key += "/" + c.Reason
			}
		}
		if p.Status.NominatedNodeName != "" {
			key += "/nominated"
		}
		pods[key]++
	}
	claims := map[string]int{}
	for _, nc := range cluster.NodeClaims(t, poolName) {
		key := "launched"
		for _, c := range []string{karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized} {
			if meta.IsStatusConditionTrue(nc.Status.Conditions, c) {
				key = c
			}
		}
		if nc.DeletionTimestamp != nil {
			key += "/deleting"
		}
		claims[key]++
	}
	nodes := &corev1.NodeList{}
	_ = cluster.Client.List(ctx, nodes)
	live, err := liveInstances(ctx, ec2c, account.ClusterName)
	t.Logf("state: pods %v; NodeClaims %v; %d Nodes; %d live instances (%v)", pods, claims, len(nodes.Items), len(live), err)
}

// running counts the app's Running pods that are not being deleted.
func running(t *testing.T) int {
	n := 0
	for _, p := range cluster.Pods(t, app) {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			n++
		}
	}
	return n
}

// cheapestSpotOffering returns the cheapest available spot offering the NodePool allows, as the
// provider prices them.
func cheapestSpotOffering(t *testing.T, np *karpv1.NodePool) offering {
	t.Helper()
	reqs, err := requirements.FromNodeSelectorRequirementsWithMinValues(np.Spec.Template.Spec.Requirements...)
	if err != nil {
		t.Fatal(err)
	}
	its, err := awsProvider().GetInstanceTypes(context.Background(), np)
	if err != nil {
		t.Fatal(err)
	}
	best, price := offering{}, math.Inf(1)
	for _, it := range its {
		if it.Requirements.Intersects(reqs) != nil {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && o.CompatibleWith(reqs) && o.Price < price {
				best, price = offering{it.Name, o.Zone()}, o.Price
			}
		}
	}
	if math.IsInf(price, 1) {
		t.Fatal("the NodePool allows no available spot offering")
	}
	t.Logf("cheapest spot offering: %s at $%.4f/h", best, price)
	return best
}

// available reports whether the provider offers o (spot) as available.
func available(t *testing.T, np *karpv1.NodePool, o offering) bool {
	t.Helper()
	its, err := awsProvider().GetInstanceTypes(context.Background(), np)
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range its {
		if it.Name != o.instanceType {
			continue
		}
		for _, of := range it.Offerings {
			if of.Zone() == o.zone && of.CapacityType() == karpv1.CapacityTypeSpot {
				return of.Available
			}
		}
	}
	t.Fatalf("the provider does not offer %s", o)
	return false
}

// refused reports whether a CreateFleet asked for o and the injected fault refused it.
func refused(o offering) bool {
	for _, f := range faults.Fleets() {
		for ov, code := range f.Refused {
			if ov.InstanceType == o.instanceType && ov.Zone == o.zone && code == "InsufficientInstanceCapacity" {
				return true
			}
		}
	}
	return false
}

// offeringsOf returns the distinct offerings of the NodeClaims, sorted.
func offeringsOf(claims []karpv1.NodeClaim) []offering {
	set := map[offering]bool{}
	for _, nc := range claims {
		set[offeringOf(nc)] = true
	}
	out := slices.Collect(maps.Keys(set))
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

func names(claims []karpv1.NodeClaim) []string {
	var out []string
	for _, nc := range claims {
		out = append(out, nc.Name)
	}
	return out
}

// newClaims returns the live NodeClaims of the pool not named in before.
func newClaims(t *testing.T, before []string) []karpv1.NodeClaim {
	t.Helper()
	var out []karpv1.NodeClaim
	for _, nc := range framework.Live(cluster.NodeClaims(t, poolName)) {
		if !slices.Contains(before, nc.Name) {
			out = append(out, nc)
		}
	}
	return out
}

// liveIDs returns the instance IDs of the cluster's pending and running instances.
func liveIDs(t *testing.T) []string {
	t.Helper()
	live, err := liveInstances(context.Background(), ec2c, account.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range live {
		out = append(out, awssdk.ToString(i.InstanceId))
	}
	return out
}

// sendEvent puts an aws.ec2 event on the interruption queue, as EventBridge does.
func sendEvent(t *testing.T, detailType, detail string) {
	t.Helper()
	body := fmt.Sprintf(`{"version":"0","id":"e2e-%d","detail-type":%q,"source":"aws.ec2","account":%q,"time":%q,"region":%q,"resources":[],"detail":%s}`,
		time.Now().UnixNano(), detailType, awstest.AccountID, time.Now().UTC().Format(time.RFC3339), awstest.Region, detail)
	if _, err := sqs.NewFromConfig(moto.Config).SendMessage(context.Background(), &sqs.SendMessageInput{
		QueueUrl: awssdk.String(account.QueueURL), MessageBody: awssdk.String(body)}); err != nil {
		t.Fatalf("send %s to %s: %v", detailType, account.QueueName, err)
	}
}

// waitQueueEmpty waits until the interruption queue holds no message, visible or in flight.
func waitQueueEmpty(t *testing.T) {
	t.Helper()
	q := sqs.NewFromConfig(moto.Config)
	framework.Eventually(t, 30*time.Second, "the interruption queue to be empty", func(ctx context.Context) (bool, error) {
		out, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: awssdk.String(account.QueueURL),
			AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			return false, nil
		}
		visible, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
		hidden, _ := strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
		return visible+hidden == 0, nil
	})
}

// assertNoInstanceWithoutNodeClaim fails when moto runs an instance of the cluster that no
// NodeClaim holds.
func assertNoInstanceWithoutNodeClaim(t *testing.T) {
	t.Helper()
	live, err := liveInstances(context.Background(), ec2c, account.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	held := map[string]bool{}
	for _, nc := range cluster.NodeClaims(t, poolName) {
		held[nc.Status.ProviderID] = true
	}
	for providerID := range live {
		if !held[providerID] {
			t.Errorf("instance %s runs without a NodeClaim", providerID)
		}
	}
}

// logCallsPerNode logs Joiner's AWS calls during a scale-up that launched nodes nodes.
func logCallsPerNode(t *testing.T, what string, calls map[string]int, nodes int) {
	t.Helper()
	total, ec2Total := 0, 0
	for op, n := range calls {
		total += n
		if strings.HasPrefix(op, "ec2:") {
			ec2Total += n
		}
	}
	ops := slices.Sorted(maps.Keys(calls))
	var parts []string
	for _, op := range ops {
		parts = append(parts, fmt.Sprintf("%s=%d", op, calls[op]))
	}
	t.Logf("%s: %d AWS calls for %d nodes (%.2f per node; EC2 %.2f per node): %s", what, total, nodes,
		float64(total)/float64(nodes), float64(ec2Total)/float64(nodes), strings.Join(parts, " "))
}

// providerCalls returns Joiner's cloud provider calls so far by "controller method", from
// karpenter_cloudprovider_duration_seconds in the registry the in-process operator uses.
func providerCalls(t *testing.T) map[string]uint64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]uint64{}
	for _, f := range families {
		if f.GetName() != "karpenter_cloudprovider_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["controller"]+" "+labels["method"]] += m.GetHistogram().GetSampleCount()
		}
	}
	return out
}

// logProviderCalls logs the cloud provider calls made since before, by controller and method.
func logProviderCalls(t *testing.T, what string, before map[string]uint64) {
	t.Helper()
	after := providerCalls(t)
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if d := after[k] - before[k]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", k, d))
		}
	}
	t.Logf("%s: cloud provider calls by controller and method: %s", what, strings.Join(parts, " "))
}
