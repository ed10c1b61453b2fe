package aws

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/controllers/fieldindex"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
)

// One moto_server serves every integration test of the package; each test seeds its own
// cluster (names never collide), so tests do not see each other's resources.
var (
	motoOnce   sync.Once
	motoShared *awstest.Moto
	motoErr    error
	// typesOnce reads moto's instance types once (DescribeInstanceTypes pages through ~1,000
	// records, several seconds on two cores); every test provider shares the result.
	typesOnce   sync.Once
	typesShared *typeSource
	typesErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if motoShared != nil {
		if err := motoShared.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "awstest:", err)
		}
	}
	os.Exit(code)
}

// sharedMoto starts the package's moto on first use.
func sharedMoto(t *testing.T) *awstest.Moto {
	t.Helper()
	if testing.Short() {
		t.Skip("moto integration test skipped with -short")
	}
	motoOnce.Do(func() { motoShared, motoErr = awstest.New(context.Background()) })
	if motoErr != nil {
		t.Fatalf("start moto: %v", motoErr)
	}
	return motoShared
}

// motoFixture is a provider on a seeded moto account with a Ready EC2NodeClass and a NodePool.
type motoFixture struct {
	moto   *awstest.Moto
	env    *awstest.Env
	faults *awstest.Faults
	ec2    *ec2.Client
	kube   client.Client
	p      *Provider
}

func newMotoFixture(t *testing.T, opts Options) *motoFixture {
	t.Helper()
	ctx := context.Background()
	m := sharedMoto(t)
	env := m.Seed(ctx, t)
	faults := awstest.NewFaults(nil)
	cfg := faults.Apply(m.Config)
	ec2c := ec2.NewFromConfig(cfg)

	typesOnce.Do(func() {
		typesShared = &typeSource{api: ec2c, region: awstest.Region, catalog: nil}
		typesErr = typesShared.refresh(ctx, time.Now())
	})
	if typesErr != nil {
		t.Fatalf("read moto's instance types: %v", typesErr)
	}

	scheme, err := apischeme.New()
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&awsv1.EC2NodeClass{}, &karpv1.NodeClaim{}).
		WithIndex(&corev1.Node{}, fieldindex.NodeProviderID, func(o client.Object) []string { return []string{o.(*corev1.Node).Spec.ProviderID} }).
		WithIndex(&karpv1.NodeClaim{}, fieldindex.NodeClaimProviderID, func(o client.Object) []string { return []string{o.(*karpv1.NodeClaim).Status.ProviderID} }).
		WithObjects(readyClass(env), testNodePool()).Build()
	opts.ClusterName = env.ClusterName
	opts.Region = awstest.Region
	opts.EC2 = ec2c
	if opts.ClusterEndpoint == "" {
		opts.ClusterEndpoint, opts.ClusterCABundle, opts.ServiceCIDR = "https://"+env.ClusterName+".example.com", "Q0E=", "10.100.0.0/16"
	}
	p, err := New(kube, opts)
	if err != nil {
		t.Fatal(err)
	}
	p.source = typesShared
	p.builder.source = typesShared
	faults.ResetCalls()
	return &motoFixture{moto: m, env: env, faults: faults, ec2: ec2c, kube: kube, p: p}
}

// readyClass is the EC2NodeClass the nodeclass controller would resolve for the seeded account:
// its private subnets, node and cluster security groups, custom AMIs and instance profile.
func readyClass(env *awstest.Env) *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{}
	nc.Name = "default"
	nc.Spec.AMIFamily = ptr(awsv1.AMIFamilyAL2023)
	nc.Spec.Tags = map[string]string{"team": "payments"}
	nc.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{awstest.DiscoveryTag: env.ClusterName}}}
	nc.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{awstest.DiscoveryTag: env.ClusterName}}}
	nc.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Tags: map[string]string{awstest.DiscoveryTag: env.ClusterName}}}
	nc.Spec.InstanceProfile = ptr(env.InstanceProfileName)
	for _, s := range env.PrivateSubnets {
		nc.Status.Subnets = append(nc.Status.Subnets, awsv1.Subnet{ID: s.ID, Zone: s.Zone, ZoneID: s.ZoneID})
	}
	nc.Status.SecurityGroups = []awsv1.SecurityGroup{
		{ID: env.NodeSecurityGroup.ID, Name: env.NodeSecurityGroup.Name},
		{ID: env.ClusterSecurityGroup.ID, Name: env.ClusterSecurityGroup.Name},
	}
	for _, a := range env.CustomAMIs {
		arch := karpv1.ArchitectureAmd64
		if a.Arch == "arm64" {
			arch = karpv1.ArchitectureArm64
		}
		nc.Status.AMIs = append(nc.Status.AMIs, awsv1.AMI{ID: a.ID, Name: a.Name, Requirements: []corev1.NodeSelectorRequirement{
			{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{arch}},
		}})
	}
	nc.Status.InstanceProfile = env.InstanceProfileName
	nc.Generation = 1
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: awsv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: 1})
	return nc
}

func testNodePool() *karpv1.NodePool {
	np := &karpv1.NodePool{}
	np.Name = "default"
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: NodeClassKind, Name: "default"}
	return np
}

var nodeClaimSeq int

// nodeClaim returns a NodeClaim of the default NodePool with the requirements and cpu request.
func nodeClaim(cpu string, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	nodeClaimSeq++
	nc := &karpv1.NodeClaim{}
	nc.Name = fmt.Sprintf("default-%d", nodeClaimSeq)
	nc.UID = types.UID(fmt.Sprintf("uid-%d-%d", time.Now().UnixNano(), nodeClaimSeq))
	nc.Labels = map[string]string{karpv1.NodePoolLabelKey: "default", "team": "payments"}
	nc.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: NodeClassKind, Name: "default"}
	nc.Spec.Requirements = reqs
	nc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	return nc
}

func req(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
	return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
}

func ptr[T any](v T) *T { return &v }
