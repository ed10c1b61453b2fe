package aws

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/providers/aws/interruption"
	"github.com/joiner-dev/joiner/providers/aws/nodeclass"
)

func TestFactory(t *testing.T) {
	m := sharedMoto(t)
	scheme, err := apischeme.New()
	if err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).Build()
	if _, _, err := Factory(FactoryOptions{Config: &m.Config})(context.Background(), kube); err == nil {
		t.Error("Factory without a cluster name succeeded")
	}
	cfg := m.Config
	cp, controllers, err := Factory(FactoryOptions{Options: Options{ClusterName: "prod", ClusterEndpoint: "https://api"}, Config: &cfg})(context.Background(), kube)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := cp.(*Provider)
	if !ok || p.Name() != "aws" || p.opts.Region != awstest.Region || p.opts.EC2 == nil || p.opts.EKS == nil {
		t.Fatalf("provider %+v", cp)
	}
	if len(controllers) != 5 {
		t.Fatalf("%d controllers, want the EC2NodeClass controller, the refresher, the template collector, the tagger and the instance status poller", len(controllers))
	}
	if _, ok := controllers[0].(*nodeclass.Controller); !ok {
		t.Errorf("first controller is %T, want the EC2NodeClass controller", controllers[0])
	}
	if r := controllers[1].(*refresher); r.NeedLeaderElection() || r.types != DefaultInstanceTypeRefreshInterval {
		t.Errorf("refresher %+v", r)
	}
	if c := controllers[2].(*templateCollector); !c.NeedLeaderElection() || c.every != DefaultLaunchTemplateGCInterval {
		t.Errorf("collector %+v", c)
	}
	if tg := controllers[3].(*tagger); tg.p != p || tg.interval != DefaultTagInterval {
		t.Errorf("tagger %+v", tg)
	}
	if isp, ok := controllers[4].(*interruption.InstanceStatusPoller); !ok || !isp.NeedLeaderElection() {
		t.Errorf("fifth controller is %T, want the leader-only instance status poller (it needs no queue)", controllers[4])
	}
	// The provider reads the catalog until the refresher has read EC2.
	if p.InstanceTypeSource() != TypeSourceCatalog {
		t.Errorf("instance types from %s before any refresh", p.InstanceTypeSource())
	}

	// With an interruption queue, the leader also runs the interruption controller.
	_, controllers, err = Factory(FactoryOptions{Options: Options{ClusterName: "prod", ClusterEndpoint: "https://api"}, Config: &cfg,
		InterruptionQueue: "prod-interruption"})(context.Background(), kube)
	if err != nil {
		t.Fatal(err)
	}
	if len(controllers) != 6 {
		t.Fatalf("%d controllers with an interruption queue, want 6", len(controllers))
	}
	if ic, ok := controllers[5].(*interruption.Controller); !ok || !ic.NeedLeaderElection() {
		t.Errorf("sixth controller is %T, want the leader-only interruption controller", controllers[5])
	}
	if _, _, err := Factory(FactoryOptions{Options: Options{ClusterName: "prod"}, Config: &cfg,
		InterruptionQueue: "arn:aws:sns:us-east-1:123456789012:prod"})(context.Background(), kube); err == nil || !strings.Contains(err.Error(), "is not an SQS queue ARN") {
		t.Errorf("Factory with an SNS topic as queue = %v", err)
	}
}

// flakyEC2 fails its first reads, then answers from fakeEC2.
type flakyEC2 struct {
	*fakeEC2
	mu       sync.Mutex
	failures int
}

func (f *flakyEC2) DescribeInstanceTypeOfferings(ctx context.Context, in *ec2.DescribeInstanceTypeOfferingsInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures > 0 {
		f.failures--
		return nil, errors.New("throttled")
	}
	return f.fakeEC2.DescribeInstanceTypeOfferings(ctx, in, opts...)
}

func TestRefresherRetriesThenRefreshes(t *testing.T) {
	cat := loadCatalog(t)
	api := &flakyEC2{fakeEC2: &fakeEC2{
		types:     []ec2types.InstanceTypeInfo{ec2Type("m5.large", "x86_64", 2, 8192, 3, 10)},
		offerings: []ec2types.InstanceTypeOffering{offering("m5.large", "us-east-1a")},
	}, failures: 2}
	scheme, _ := apischeme.New()
	p, err := New(fake.NewClientBuilder().WithScheme(scheme).Build(), Options{ClusterName: "prod", Region: "us-east-1", EC2: api, Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	r := &refresher{p: p, log: logr.Discard(), clock: clock.RealClock{}, types: time.Hour, spot: time.Hour, retryMin: time.Millisecond, retryMax: 5 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Start(ctx) }()
	// Asserted below; the poll only waits for the refresh.
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return p.InstanceTypeSource() == TypeSourceEC2, nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p.InstanceTypeSource() != TypeSourceEC2 {
		t.Fatal("the refresher never read EC2's instance types")
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if api.failures != 0 || api.callCount("DescribeInstanceTypes") != 1 || api.callCount("DescribeSpotPriceHistory") != 1 {
		t.Errorf("failures left %d, calls %v: want two failed reads retried, one success and one spot read", api.failures, api.fakeEC2.calls)
	}
}
