package aws

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/testbed"
)

// eksCalls counts the EKS calls the provider made since the fixture last reset its counters.
func eksCalls(f *motoFixture) int {
	n := 0
	for op, c := range f.faults.Calls() {
		if strings.HasPrefix(op, "eks:") {
			n += c
		}
	}
	return n
}

// launchedUserData returns the user data of the cluster's one launch template.
func launchedUserData(t *testing.T, ctx context.Context, f *motoFixture) string {
	t.Helper()
	lts, err := f.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:eks:eks-cluster-name"), Values: []string{f.env.ClusterName}}}})
	if err != nil || len(lts.LaunchTemplates) != 1 {
		t.Fatalf("launch templates of the cluster: %v, %v", lts, err)
	}
	versions, err := f.ec2.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: lts.LaunchTemplates[0].LaunchTemplateId})
	if err != nil {
		t.Fatal(err)
	}
	ud, err := base64.StdEncoding.DecodeString(aws.ToString(versions.LaunchTemplateVersions[0].LaunchTemplateData.UserData))
	if err != nil {
		t.Fatal(err)
	}
	return string(ud)
}

// TestMotoJoinInfoWithoutDescribeCluster is the case of an account with no EKS cluster (moto has
// none unless a test creates it): with the endpoint set, the certificate authority of Joiner's own
// kube client and the service CIDR of the cluster's ServiceCIDR object (a real apiserver), or
// every value set, a launch succeeds and eks:DescribeCluster is never called.
func TestMotoJoinInfoWithoutDescribeCluster(t *testing.T) {
	sharedMoto(t) // first, so that -short skips the apiserver too
	ctx := context.Background()
	tb, err := testbed.Start(ctx, testbed.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tb.Stop(); err != nil {
			t.Error(err)
		}
	})
	reader, err := client.New(tb.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	kubeCA, err := CABundleFromRESTConfig(tb.Config)
	if err != nil || kubeCA == "" {
		t.Fatalf("CA of the test bed's client: %q, %v", kubeCA, err)
	}
	clusterCIDR, err := ClusterServiceCIDR(ctx, reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name                 string
		ca, cidr             string
		reader               client.Reader
		wantCA, wantCIDRLine string
	}{
		{name: "every value set", ca: "Q0E=", cidr: "10.100.0.0/16", wantCA: "Q0E=", wantCIDRLine: "cidr: 10.100.0.0/16"},
		{name: "CA of the kube client, service CIDR of the cluster", ca: kubeCA, reader: reader,
			wantCA: kubeCA, wantCIDRLine: "cidr: " + clusterCIDR},
		{name: "the setting wins over the cluster's service CIDR", ca: kubeCA, cidr: "172.20.0.0/16", reader: reader,
			wantCA: kubeCA, wantCIDRLine: "cidr: 172.20.0.0/16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newMotoFixture(t, Options{ClusterEndpoint: "https://api.example.com", ClusterCABundle: tt.ca, ServiceCIDR: tt.cidr, ClusterReader: tt.reader})
			f.p.opts.EKS = newEKSClient(f)
			if _, err := f.p.Create(ctx, nodeClaim("1", m5Family)); err != nil {
				t.Fatalf("launch: %v", err)
			}
			if n := eksCalls(f); n != 0 {
				t.Errorf("EKS calls %v, want none", f.faults.Calls())
			}
			ud := launchedUserData(t, ctx, f)
			for _, want := range []string{"apiServerEndpoint: https://api.example.com", "certificateAuthority: " + tt.wantCA, tt.wantCIDRLine} {
				if !strings.Contains(ud, want) {
					t.Errorf("user data lacks %q:\n%s", want, ud)
				}
			}
		})
	}
}

// TestMotoJoinInfoMissing: with only the endpoint set and no EKS cluster, an AL2023 launch fails
// with an error naming the settings that supply what is missing (and not the endpoint, which is
// set), with DescribeCluster's own error; DescribeCluster is asked again only ClusterInfoRetry later.
func TestMotoJoinInfoMissing(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	f := newMotoFixture(t, Options{ClusterEndpoint: "https://api.example.com", Clock: clk})
	f.p.opts.EKS = newEKSClient(f)
	ctx := context.Background()
	_, err := f.p.Create(ctx, nodeClaim("1", m5Family))
	if err == nil {
		t.Fatal("launched with no certificate authority and no service CIDR")
	}
	for _, want := range []string{"AL2023 nodes of cluster " + f.env.ClusterName + " cannot join", "--cluster-ca-bundle or CLUSTER_CA_BUNDLE",
		"--service-cidr or SERVICE_CIDR", "eks:DescribeCluster " + f.env.ClusterName + " (asked for its certificate authority, service CIDR)", "ResourceNotFound"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "--cluster-endpoint") {
		t.Errorf("error suggests setting the endpoint, which is set: %v", err)
	}
	for i, step := range []struct {
		advance time.Duration
		want    int
	}{{0, 1}, {ClusterInfoRetry - time.Second, 1}, {time.Second, 2}} {
		clk.Step(step.advance)
		if i > 0 {
			if _, err := f.p.Create(ctx, nodeClaim("1", m5Family)); err == nil {
				t.Fatal("launched with no certificate authority and no service CIDR")
			}
		}
		if n := eksCalls(f); n != step.want {
			t.Errorf("after %d launches and %s: %d EKS calls, want %d", i+1, step.advance, n, step.want)
		}
	}
}
