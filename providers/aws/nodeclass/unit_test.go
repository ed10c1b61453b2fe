package nodeclass

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/testsupport/controllertest"
)

func TestHash(t *testing.T) {
	base := func() *awsv1.EC2NodeClass {
		return &awsv1.EC2NodeClass{
			ObjectMeta: metav1.ObjectMeta{Name: "default"},
			Spec: awsv1.EC2NodeClassSpec{
				SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
				SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "demo"}}},
				AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
				Role:                       "KarpenterNodeRole-demo",
				BlockDeviceMappings: []awsv1.BlockDeviceMapping{
					{DeviceName: ptr.To("/dev/xvda"), RootVolume: true, EBS: &awsv1.BlockDevice{VolumeSize: ptr.To(resource.MustParse("20Gi")), VolumeType: ptr.To("gp3")}},
					{DeviceName: ptr.To("/dev/xvdb"), EBS: &awsv1.BlockDevice{VolumeSize: ptr.To(resource.MustParse("100Gi"))}},
				},
			},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*awsv1.EC2NodeClass)
		drifts bool
	}{
		{name: "subnet selector terms", change: func(nc *awsv1.EC2NodeClass) { nc.Spec.SubnetSelectorTerms[0].ID = "subnet-1" }},
		{name: "security group selector terms", change: func(nc *awsv1.EC2NodeClass) { nc.Spec.SecurityGroupSelectorTerms[0].Name = "web" }},
		{name: "AMI selector terms", change: func(nc *awsv1.EC2NodeClass) { nc.Spec.AMISelectorTerms[0].Alias = "al2023@v20260801" }},
		{name: "capacity reservation selector terms", change: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{ID: "cr-1"}}
		}},
		{name: "ipPrefixCount", change: func(nc *awsv1.EC2NodeClass) { nc.Spec.IPPrefixCount = ptr.To[int32](2) }},
		{name: "amiFamily set to the alias's family", change: func(nc *awsv1.EC2NodeClass) { nc.Spec.AMIFamily = ptr.To(awsv1.AMIFamilyAL2023) }},
		{name: "block devices in another order", change: func(nc *awsv1.EC2NodeClass) {
			slices.Reverse(nc.Spec.BlockDeviceMappings)
		}},
		{name: "status and other annotations", change: func(nc *awsv1.EC2NodeClass) {
			nc.Annotations = map[string]string{"team": "a"}
			nc.Status.InstanceProfile = "p"
		}},
		{name: "amiFamily Custom", change: func(nc *awsv1.EC2NodeClass) { nc.Spec.AMIFamily = ptr.To(awsv1.AMIFamilyCustom) }, drifts: true},
		{name: "role", change: func(nc *awsv1.EC2NodeClass) { nc.Spec.Role = "other" }, drifts: true},
		{name: "tags", change: func(nc *awsv1.EC2NodeClass) { nc.Spec.Tags = map[string]string{"team": "a"} }, drifts: true},
		{name: "user data", change: func(nc *awsv1.EC2NodeClass) { nc.Spec.UserData = ptr.To("echo hi") }, drifts: true},
		{name: "root volume size", change: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize = ptr.To(resource.MustParse("40Gi"))
		}, drifts: true},
		{name: "kubelet maxPods", change: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.Kubelet = &awsv1.KubeletConfiguration{MaxPods: ptr.To[int32](110)}
		}, drifts: true},
		{name: "metadata options", change: func(nc *awsv1.EC2NodeClass) {
			nc.Spec.MetadataOptions = &awsv1.MetadataOptions{HTTPTokens: ptr.To("optional")}
		}, drifts: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := Hash(base())
			if !regexp.MustCompile(`^[0-9]+$`).MatchString(before) || Hash(base()) != before {
				t.Fatalf("Hash = %q: want a stable decimal number", before)
			}
			nc := base()
			tc.change(nc)
			if after := Hash(nc); (after != before) != tc.drifts {
				t.Errorf("hash %s -> %s; want a change: %t", before, after, tc.drifts)
			}
		})
	}
}

func TestCheckReady(t *testing.T) {
	ready := func(status metav1.ConditionStatus, generation int64) []metav1.Condition {
		return []metav1.Condition{{Type: awsv1.ConditionTypeReady, Status: status, Reason: "R", Message: "because", ObservedGeneration: generation}}
	}
	full := awsv1.EC2NodeClassStatus{
		Subnets: []awsv1.Subnet{{ID: "subnet-1", Zone: "us-east-1a"}}, SecurityGroups: []awsv1.SecurityGroup{{ID: "sg-1"}},
		AMIs: []awsv1.AMI{{ID: "ami-1"}}, InstanceProfile: "p",
	}
	for _, tc := range []struct {
		name   string
		status awsv1.EC2NodeClassStatus
		want   string
	}{
		{name: "ready", status: func() awsv1.EC2NodeClassStatus { s := full; s.Conditions = ready("True", 2); return s }()},
		{name: "never resolved", want: "has not been resolved yet"},
		{name: "stale generation", status: func() awsv1.EC2NodeClassStatus { s := full; s.Conditions = ready("True", 1); return s }(), want: "generation 2 has not been resolved"},
		{name: "not ready", status: func() awsv1.EC2NodeClassStatus { s := full; s.Conditions = ready("False", 2); return s }(), want: "Ready=False (R): because"},
		{name: "no AMIs", status: func() awsv1.EC2NodeClassStatus {
			s := full
			s.AMIs = nil
			s.Conditions = ready("True", 2)
			return s
		}(), want: "lacks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 2}, Status: tc.status}
			err := CheckReady(nc)
			if tc.want == "" {
				if err != nil {
					t.Errorf("CheckReady = %v, want nil", err)
				}
				return
			}
			if !cloudprovider.IsNodeClassNotReady(err) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckReady = %v, want a NodeClassNotReadyError containing %q", err, tc.want)
			}
		})
	}
}

func TestNewControllerValidates(t *testing.T) {
	kube := fake.NewClientBuilder().Build()
	clients := NewClients(moto.Config, RetryOptions{})
	for _, tc := range []struct {
		name string
		kube client.Client
		opts Options
		want string
	}{
		{name: "no client", opts: Options{ClusterName: "c", Region: "r"}, want: "Kubernetes client is required"},
		{name: "no cluster", kube: kube, opts: Options{Region: "r"}, want: "ClusterName is required"},
		{name: "no region", kube: kube, opts: Options{ClusterName: "c"}, want: "Region is required"},
	} {
		if _, err := NewController(tc.kube, clients.EC2, clients.IAM, clients.SSM, nil, nil, tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := NewController(kube, nil, clients.IAM, clients.SSM, nil, nil, Options{ClusterName: "c", Region: "r"}); err == nil {
		t.Error("no EC2 client: no error")
	}
}

// unitFixture is a controller on a fake Kubernetes client and moto, reconciled by hand.
type unitFixture struct {
	kube client.Client
	c    *Controller
	aws  *awstest.Env
	clk  interface{ Step(time.Duration) }
}

func newUnitFixture(t *testing.T, objs ...client.Object) *unitFixture {
	t.Helper()
	scheme, err := apischeme.New()
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&awsv1.EC2NodeClass{}, &karpv1.NodeClaim{}).WithObjects(objs...).Build()
	c, clk := newController(t, kube, Options{})
	return &unitFixture{kube: kube, c: c, aws: moto.Seed(context.Background(), t), clk: clk}
}

// reconcile runs Reconcile until it stops changing metadata and returns the class and the
// last result.
func (f *unitFixture) reconcile(t *testing.T, name string) (*awsv1.EC2NodeClass, ctrl.Result, error) {
	t.Helper()
	var (
		res ctrl.Result
		err error
	)
	for range 3 {
		before := &awsv1.EC2NodeClass{}
		if gerr := f.kube.Get(context.Background(), types.NamespacedName{Name: name}, before); gerr != nil {
			t.Fatal(gerr)
		}
		res, err = f.c.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: name}})
		after := &awsv1.EC2NodeClass{}
		if gerr := f.kube.Get(context.Background(), types.NamespacedName{Name: name}, after); gerr != nil {
			t.Fatal(gerr)
		}
		if equalMetadata(before, after) {
			return after, res, err
		}
	}
	t.Fatalf("class %s: metadata still changing after 3 reconciles", name)
	return nil, res, err
}

func (f *unitFixture) create(t *testing.T, spec awsv1.EC2NodeClassSpec) string {
	t.Helper()
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: controllertest.Name(className(t))}, Spec: spec}
	if err := f.kube.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	return nc.Name
}

// TestTransientErrorsKeepStatus: throttling leaves the resolved status and conditions as they
// were and asks to be retried; a permanent error (missing permission) says which call failed
// in the condition, and the values stay until it is fixed.
func TestTransientErrorsKeepStatus(t *testing.T) {
	f := newUnitFixture(t)
	name := f.create(t, baseSpec(f.aws))
	nc, _, err := f.reconcile(t, name)
	if err != nil || checkConditions(nc, allReady()) != nil {
		t.Fatalf("first resolution: %v, %v", err, checkConditions(nc, allReady()))
	}
	subnets := nc.Status.Subnets

	f.clk.Step(2 * time.Minute) // past the subnet cache's TTL
	moto.FailNext("ec2:DescribeSubnets", testRetries.MaxAttempts, 503, "")
	nc, _, err = f.reconcile(t, name)
	if err == nil || !strings.Contains(err.Error(), "RequestLimitExceeded") {
		t.Errorf("reconcile while throttled = %v, want the throttling error (retried with backoff)", err)
	}
	if cerr := checkConditions(nc, allReady()); cerr != nil || len(nc.Status.Subnets) != len(subnets) {
		t.Errorf("status after throttling: %v, subnets %v", cerr, nc.Status.Subnets)
	}

	f.clk.Step(2 * time.Minute)
	moto.FailNext("ec2:DescribeSubnets", 1, 403, "UnauthorizedOperation")
	nc, res, err := f.reconcile(t, name)
	if err != nil || res.RequeueAfter != DefaultResyncPeriod {
		t.Errorf("reconcile without permission = %+v, %v; want a resync and no error", res, err)
	}
	if cerr := checkConditions(nc, with(map[string]condWant{
		awsv1.ConditionTypeSubnetsReady: notOK(ReasonResolutionFailed, "ec2:DescribeSubnets failed", "UnauthorizedOperation", "check that Joiner's IAM role allows ec2:DescribeSubnets"),
		awsv1.ConditionTypeReady:        notOK(ReasonUnhealthyDependents, "SubnetsReady=False"),
	})); cerr != nil || len(nc.Status.Subnets) != len(subnets) {
		t.Errorf("status without permission: %v, subnets %v", cerr, nc.Status.Subnets)
	}

	f.clk.Step(2 * time.Minute)
	if nc, _, err = f.reconcile(t, name); err != nil || checkConditions(nc, allReady()) != nil {
		t.Errorf("after the permission came back: %v, %v", err, checkConditions(nc, allReady()))
	}
}

// TestCachesFollowTTLs: within their TTLs, AWS answers come from the caches; subnets, security
// groups, AMIs and reservations are asked again after a minute, instance profiles after 15
// minutes and SSM parameters after a day, when a new "recommended" AMI shows up in status.
func TestCachesFollowTTLs(t *testing.T) {
	f := newUnitFixture(t)
	spec := baseSpec(f.aws)
	spec.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: discoveryTags(f.aws)}}
	name := f.create(t, spec)
	if nc, _, err := f.reconcile(t, name); err != nil || checkConditions(nc, allReady()) != nil {
		t.Fatalf("first resolution: %v, %v", err, checkConditions(nc, allReady()))
	}
	ops := []string{"ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeImages", "ec2:DescribeCapacityReservations", "ssm:GetParameter", "iam:GetInstanceProfile"}
	calls := func() map[string]int {
		out := map[string]int{}
		for _, op := range ops {
			out[op] = moto.Calls(op)
		}
		return out
	}
	step := func(d time.Duration, want map[string]int) {
		t.Helper()
		before := calls()
		f.clk.Step(d)
		if _, _, err := f.reconcile(t, name); err != nil {
			t.Fatal(err)
		}
		after := calls()
		for _, op := range ops {
			if got := after[op] - before[op]; got != want[op] {
				t.Errorf("after %s: %d %s calls, want %d", d, got, op, want[op])
			}
		}
	}
	step(0, nil)
	step(61*time.Second, map[string]int{"ec2:DescribeSubnets": 1, "ec2:DescribeSecurityGroups": 1, "ec2:DescribeImages": 1, "ec2:DescribeCapacityReservations": 1})
	step(15*time.Minute, map[string]int{"ec2:DescribeSubnets": 1, "ec2:DescribeSecurityGroups": 1, "ec2:DescribeImages": 1, "ec2:DescribeCapacityReservations": 1, "iam:GetInstanceProfile": 1})

	recommended := "/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id"
	old, _ := awstest.PublishedParameter(recommended)
	moto.SetParameter(recommended, f.aws.CustomAMIs[0].ID)
	t.Cleanup(func() { moto.SetParameter(recommended, old) })
	step(time.Hour, map[string]int{"ec2:DescribeSubnets": 1, "ec2:DescribeSecurityGroups": 1, "ec2:DescribeImages": 1, "ec2:DescribeCapacityReservations": 1,
		"iam:GetInstanceProfile": 1})
	nc, _, _ := f.reconcile(t, name)
	if slices.Contains(amiIDs(nc), f.aws.CustomAMIs[0].ID) {
		t.Errorf("the new recommended AMI showed before the SSM cache expired")
	}
	step(24*time.Hour, map[string]int{"ec2:DescribeSubnets": 1, "ec2:DescribeSecurityGroups": 1, "ec2:DescribeImages": 1, "ec2:DescribeCapacityReservations": 1,
		"iam:GetInstanceProfile": 1, "ssm:GetParameter": 4})
	nc, _, _ = f.reconcile(t, name)
	if !slices.Contains(amiIDs(nc), f.aws.CustomAMIs[0].ID) || slices.Contains(amiIDs(nc), old) {
		t.Errorf("status.amis = %v after the SSM TTL, want %s instead of %s", amiIDs(nc), f.aws.CustomAMIs[0].ID, old)
	}
}

// TestHashVersionChangeRestampsNodeClaims: when the class's hash version changes, its NodeClaims
// get the new hash and version (a drifted one only the version, so that it stays drifted); other
// classes' NodeClaims are left alone. The old stamp is Karpenter's, as on a cluster Joiner takes
// over: its NodeClaims must not all drift because Joiner hashes differently.
func TestHashVersionChangeRestampsNodeClaims(t *testing.T) {
	if HashVersion == awsv1.EC2NodeClassHashVersion {
		t.Fatalf("HashVersion is Karpenter's %s, but Hash is not Karpenter's algorithm", HashVersion)
	}
	oldStamp := map[string]string{awsv1.AnnotationEC2NodeClassHash: "123", awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}
	claim := func(name, class string, annotations map[string]string, drifted bool) *karpv1.NodeClaim {
		c := controllertest.NodeClaim(name, "default")
		c.Annotations = annotations
		c.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}
		if drifted {
			c.Status.Conditions = []metav1.Condition{{Type: karpv1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodeClassDrift", LastTransitionTime: metav1.Now()}}
		}
		return c
	}
	f := newUnitFixture(t,
		claim("stale", "main", oldStamp, false),
		claim("drifted", "main", oldStamp, true),
		claim("current", "main", map[string]string{awsv1.AnnotationEC2NodeClassHash: "9", awsv1.AnnotationEC2NodeClassHashVersion: HashVersion}, false),
		claim("other-class", "other", oldStamp, false))
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "main", Annotations: oldStamp}, Spec: baseSpec(f.aws)}
	if err := f.kube.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	nc, _, err := f.reconcile(t, "main")
	if err != nil {
		t.Fatal(err)
	}
	newStamp := map[string]string{awsv1.AnnotationEC2NodeClassHash: Hash(nc), awsv1.AnnotationEC2NodeClassHashVersion: HashVersion}
	for name, want := range map[string]map[string]string{
		"stale": newStamp, "other-class": oldStamp,
		"drifted": {awsv1.AnnotationEC2NodeClassHash: "123", awsv1.AnnotationEC2NodeClassHashVersion: HashVersion},
		"current": {awsv1.AnnotationEC2NodeClassHash: "9", awsv1.AnnotationEC2NodeClassHashVersion: HashVersion},
	} {
		got := &karpv1.NodeClaim{}
		if err := f.kube.Get(context.Background(), types.NamespacedName{Name: name}, got); err != nil {
			t.Fatal(err)
		}
		for k, v := range want {
			if got.Annotations[k] != v {
				t.Errorf("NodeClaim %s: %s = %q, want %q", name, k, got.Annotations[k], v)
			}
		}
	}
}

// TestAliasWithoutKubernetesVersion: without a way to learn the cluster's version, an alias
// cannot resolve, and the condition says what to do instead.
func TestAliasWithoutKubernetesVersion(t *testing.T) {
	f := newUnitFixture(t)
	f.c.opts.KubernetesVersion = nil
	nc, _, err := f.reconcile(t, f.create(t, baseSpec(f.aws)))
	if err != nil {
		t.Fatal(err)
	}
	if cerr := checkConditions(nc, map[string]condWant{awsv1.ConditionTypeAMIsReady: notOK(awsv1.ReasonAMINotFound,
		"spec.amiSelectorTerms[0].alias al2023@latest: the cluster's Kubernetes version is unknown")}); cerr != nil {
		t.Error(cerr)
	}
	f.c.opts.KubernetesVersion = func(context.Context) (string, error) { return "", errors.New("apiserver unreachable") }
	f.clk.Step(time.Hour)
	nc, _, _ = f.reconcile(t, nc.Name)
	if c := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeAMIsReady); c == nil || !strings.Contains(c.Message, "apiserver unreachable") {
		t.Errorf("AMIsReady = %+v, want the version error", c)
	}
}
