package aws

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// ClusterInfoRetry is how long an incomplete answer about the cluster (a source failed, and
// something nodes need is still unknown) is reused before the sources are asked again, so that a
// launch loop does not call eks:DescribeCluster once per attempt.
const ClusterInfoRetry = time.Minute

// DefaultServiceCIDRName is the ServiceCIDR object (networking.k8s.io/v1) the apiserver keeps for
// its own --service-cluster-ip-range.
const DefaultServiceCIDRName = "kubernetes"

// clusterInfo is what nodes need to join: each field from the first source that knows it.
type clusterInfo struct {
	endpoint, caBundle, serviceCIDR string
	// unknown says why the sources asked did not fill every field (nil when none failed).
	unknown error
}

// complete reports whether every field is known, so that no source needs asking again.
func (ci clusterInfo) complete() bool {
	return ci.endpoint != "" && ci.caBundle != "" && ci.serviceCIDR != ""
}

// clusterInfo returns what nodes need to join. Each field comes from the first source that knows
// it: the setting (ClusterEndpoint, ClusterCABundle, ServiceCIDR); for the service CIDR, the
// cluster's ServiceCIDR object (ClusterReader); last, eks:DescribeCluster, asked only when
// something is still unknown. A complete answer is kept; an incomplete one for ClusterInfoRetry.
// Whether what is missing stops a launch depends on the AMI family (requireFor).
func (p *Provider) clusterInfo(ctx context.Context) clusterInfo {
	p.clusterMu.Lock()
	defer p.clusterMu.Unlock()
	if p.cluster != nil && (p.cluster.complete() || p.clock.Since(p.clusterAt) < ClusterInfoRetry) {
		return *p.cluster
	}
	ci := clusterInfo{endpoint: p.opts.ClusterEndpoint, caBundle: p.opts.ClusterCABundle, serviceCIDR: p.opts.ServiceCIDR}
	var errs []error
	if ci.serviceCIDR == "" && p.opts.ClusterReader != nil {
		cidr, err := ClusterServiceCIDR(ctx, p.opts.ClusterReader)
		if err != nil {
			errs = append(errs, err)
		}
		ci.serviceCIDR = cidr
	}
	if !ci.complete() {
		if err := p.describeCluster(ctx, &ci); err != nil {
			errs = append(errs, err)
		}
	}
	ci.unknown = errors.Join(errs...)
	if ctx.Err() != nil {
		return ci // a cancelled lookup says nothing about the cluster: ask again next time
	}
	if !ci.complete() {
		p.log.Info("some of what nodes need to join is unknown; the sources are asked again later", "cluster", p.opts.ClusterName,
			"endpointKnown", ci.endpoint != "", "caBundleKnown", ci.caBundle != "", "serviceCIDRKnown", ci.serviceCIDR != "",
			"retryAfter", ClusterInfoRetry.String(), "why", fmt.Sprint(ci.unknown))
	}
	p.cluster, p.clusterAt = &ci, p.clock.Now()
	return ci
}

// describeCluster fills the empty fields of ci from eks:DescribeCluster.
func (p *Provider) describeCluster(ctx context.Context, ci *clusterInfo) error {
	var asked []string
	for _, f := range []struct {
		name string
		v    string
	}{{"endpoint", ci.endpoint}, {"certificate authority", ci.caBundle}, {"service CIDR", ci.serviceCIDR}} {
		if f.v == "" {
			asked = append(asked, f.name)
		}
	}
	if p.opts.EKS == nil {
		return fmt.Errorf("no EKS client to ask for the cluster's %s", strings.Join(asked, ", "))
	}
	out, err := p.opts.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(p.opts.ClusterName)})
	if err != nil {
		return fmt.Errorf("eks:DescribeCluster %s (asked for its %s): %w", p.opts.ClusterName, strings.Join(asked, ", "), err)
	}
	c := out.Cluster
	if c == nil {
		return fmt.Errorf("eks:DescribeCluster %s returned no cluster", p.opts.ClusterName)
	}
	if ci.endpoint == "" {
		ci.endpoint = aws.ToString(c.Endpoint)
	}
	if ci.caBundle == "" && c.CertificateAuthority != nil {
		ci.caBundle = aws.ToString(c.CertificateAuthority.Data)
	}
	if ci.serviceCIDR == "" && c.KubernetesNetworkConfig != nil {
		ci.serviceCIDR = aws.ToString(c.KubernetesNetworkConfig.ServiceIpv4Cidr)
		if ci.serviceCIDR == "" {
			ci.serviceCIDR = aws.ToString(c.KubernetesNetworkConfig.ServiceIpv6Cidr)
		}
	}
	return nil
}

// requireFor returns an error naming what nodes of the AMI family need and ci lacks, with the
// setting that supplies each and why the other sources did not: every family needs the endpoint,
// AL2023 (nodeadm) and Bottlerocket the certificate authority, AL2023 the service CIDR. AL2's
// bootstrap.sh looks the certificate authority up itself; Custom user data is the user's.
func (ci clusterInfo) requireFor(family, clusterName string) error {
	var missing []string
	if ci.endpoint == "" {
		missing = append(missing, "the API server endpoint (set --cluster-endpoint or CLUSTER_ENDPOINT)")
	}
	if ci.caBundle == "" && (family == awsv1.AMIFamilyAL2023 || family == awsv1.AMIFamilyBottlerocket) {
		missing = append(missing, "the certificate authority (set --cluster-ca-bundle or CLUSTER_CA_BUNDLE to the base64 PEM bundle; "+
			"by default it is the CA of Joiner's own Kubernetes client)")
	}
	if ci.serviceCIDR == "" && family == awsv1.AMIFamilyAL2023 {
		missing = append(missing, "the service CIDR (set --service-cidr or SERVICE_CIDR; by default it is read from the cluster's ServiceCIDR "+
			DefaultServiceCIDRName+")")
	}
	if len(missing) == 0 {
		return nil
	}
	err := fmt.Errorf("%s nodes of cluster %s cannot join: unknown %s", family, clusterName, strings.Join(missing, "; "))
	if ci.unknown != nil {
		err = fmt.Errorf("%w; the other sources failed: %w", err, ci.unknown)
	}
	return err
}

// CABundleFromRESTConfig returns the certificate authority a client of cfg trusts, as the base64
// PEM bundle ClusterCABundle takes: its CAData, else the contents of its CAFile; "" when it has
// neither (a client that trusts the system roots).
func CABundleFromRESTConfig(cfg *rest.Config) (string, error) {
	data := cfg.CAData
	if len(data) == 0 && cfg.CAFile != "" {
		var err error
		if data, err = os.ReadFile(cfg.CAFile); err != nil {
			return "", fmt.Errorf("read the certificate authority of the Kubernetes client: %w", err)
		}
	}
	if len(data) == 0 {
		return "", nil
	}
	return base64.StdEncoding.EncodeToString(data), nil
}

// ClusterServiceCIDR returns the service CIDR of the cluster r reads, from the ServiceCIDR object
// the apiserver keeps for its own range (DefaultServiceCIDRName, networking.k8s.io/v1, Kubernetes
// 1.33 and later): its IPv4 CIDR, else its first.
func ClusterServiceCIDR(ctx context.Context, r client.Reader) (string, error) {
	var sc networkingv1.ServiceCIDR
	if err := r.Get(ctx, client.ObjectKey{Name: DefaultServiceCIDRName}, &sc); err != nil {
		return "", fmt.Errorf("read the service CIDR from ServiceCIDR %s (networking.k8s.io/v1): %w", DefaultServiceCIDRName, err)
	}
	for _, c := range sc.Spec.CIDRs {
		if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
			return c, nil
		}
	}
	if len(sc.Spec.CIDRs) == 0 {
		return "", fmt.Errorf("ServiceCIDR %s lists no CIDR", DefaultServiceCIDRName)
	}
	return sc.Spec.CIDRs[0], nil
}
