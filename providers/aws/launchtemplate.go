package aws

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/clock"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// LaunchTemplateNamePrefix starts the name of every launch template the provider creates; the
// cluster name and a hash of the template's content follow.
const LaunchTemplateNamePrefix = "joiner/"

// KarpenterLaunchTemplateNamePrefix starts the name of every launch template Karpenter creates (a
// hash follows). Those tagged eks:eks-cluster-name with this cluster's name are adopted: collected
// when unused and deleted with their EC2NodeClass, like the provider's own.
const KarpenterLaunchTemplateNamePrefix = "karpenter.k8s.aws/"

// DefaultLaunchTemplateIdleTTL is how long a launch template may go unused before garbage
// collection deletes it.
const DefaultLaunchTemplateIdleTTL = 10 * time.Minute

// launchTemplateConfig is everything a launch template holds. Its hash names the template, so
// a template is never changed: a new configuration gets a new template.
type launchTemplateConfig struct {
	ClusterName         string
	NodeClass           string
	ImageID             string
	SecurityGroupIDs    []string
	UserData            string
	InstanceProfile     string
	BlockDeviceMappings []awsv1.BlockDeviceMapping
	MetadataOptions     awsv1.MetadataOptions
	DetailedMonitoring  bool
	AssociatePublicIP   *bool
	NetworkInterfaces   []awsv1.NetworkInterface
	ConnectionTracking  *awsv1.ConnectionTracking
	IPPrefixCount       *int32
	Tags                map[string]string
}

// name returns the template's name: joiner/<cluster>/<hash of the configuration>.
func (c *launchTemplateConfig) name() (string, error) {
	h, err := jsonHash(c)
	if err != nil {
		return "", err
	}
	return LaunchTemplateNamePrefix + c.ClusterName + "/" + strconv.FormatUint(h, 10), nil
}

// defaultBlockDevices returns the block devices of a family when the class sets none: a 20Gi
// encrypted gp3 root volume on Amazon Linux, a 4Gi OS volume and a 20Gi data volume on
// Bottlerocket, a 50Gi root volume on Windows, none for Custom.
func defaultBlockDevices(family string) []awsv1.BlockDeviceMapping {
	vol := func(dev string, size string) awsv1.BlockDeviceMapping {
		q := resource.MustParse(size)
		return awsv1.BlockDeviceMapping{DeviceName: aws.String(dev), EBS: &awsv1.BlockDevice{
			VolumeSize: &q, VolumeType: aws.String("gp3"), Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true),
		}}
	}
	switch {
	case family == awsv1.AMIFamilyCustom:
		return nil
	case family == awsv1.AMIFamilyBottlerocket:
		return []awsv1.BlockDeviceMapping{vol("/dev/xvda", "4Gi"), vol("/dev/xvdb", "20Gi")}
	case isWindows(family):
		return []awsv1.BlockDeviceMapping{vol("/dev/sda1", "50Gi")}
	}
	return []awsv1.BlockDeviceMapping{vol("/dev/xvda", "20Gi")}
}

// metadataDefaults fills the unset fields of the class's metadata options with the CRD
// defaults: endpoint enabled, IPv6 disabled, hop limit 1, tokens required.
func metadataDefaults(in *awsv1.MetadataOptions) awsv1.MetadataOptions {
	out := awsv1.MetadataOptions{
		HTTPEndpoint: aws.String("enabled"), HTTPProtocolIPv6: aws.String("disabled"),
		HTTPPutResponseHopLimit: aws.Int64(1), HTTPTokens: aws.String("required"),
	}
	if in == nil {
		return out
	}
	if in.HTTPEndpoint != nil {
		out.HTTPEndpoint = in.HTTPEndpoint
	}
	if in.HTTPProtocolIPv6 != nil {
		out.HTTPProtocolIPv6 = in.HTTPProtocolIPv6
	}
	if in.HTTPPutResponseHopLimit != nil {
		out.HTTPPutResponseHopLimit = in.HTTPPutResponseHopLimit
	}
	if in.HTTPTokens != nil {
		out.HTTPTokens = in.HTTPTokens
	}
	return out
}

// gibCeil returns a volume size in GiB, rounded up (EC2 takes whole GiB).
func gibCeil(q *resource.Quantity) int32 {
	return int32((q.Value() + gi - 1) / gi)
}

// launchTemplateData returns the EC2 request data of the configuration.
func (c *launchTemplateConfig) launchTemplateData() *ec2types.RequestLaunchTemplateData {
	d := &ec2types.RequestLaunchTemplateData{
		ImageId:    aws.String(c.ImageID),
		UserData:   aws.String(c.UserData),
		Monitoring: &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(c.DetailedMonitoring)},
		MetadataOptions: &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
			HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointState(aws.ToString(c.MetadataOptions.HTTPEndpoint)),
			HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(aws.ToString(c.MetadataOptions.HTTPProtocolIPv6)),
			HttpPutResponseHopLimit: aws.Int32(int32(aws.ToInt64(c.MetadataOptions.HTTPPutResponseHopLimit))),
			HttpTokens:              ec2types.LaunchTemplateHttpTokensState(aws.ToString(c.MetadataOptions.HTTPTokens)),
		},
	}
	if c.InstanceProfile != "" {
		d.IamInstanceProfile = &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(c.InstanceProfile)}
	}
	for _, b := range c.BlockDeviceMappings {
		m := ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: b.DeviceName}
		if e := b.EBS; e != nil {
			ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{
				DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, KmsKeyId: e.KMSKeyID,
				SnapshotId: e.SnapshotID, VolumeInitializationRate: e.VolumeInitializationRate,
			}
			if ebs.DeleteOnTermination == nil {
				ebs.DeleteOnTermination = aws.Bool(true)
			}
			if e.IOPS != nil {
				ebs.Iops = aws.Int32(int32(*e.IOPS))
			}
			if e.Throughput != nil {
				ebs.Throughput = aws.Int32(int32(*e.Throughput))
			}
			if e.VolumeSize != nil {
				ebs.VolumeSize = aws.Int32(gibCeil(e.VolumeSize))
			}
			if e.VolumeType != nil {
				ebs.VolumeType = ec2types.VolumeType(*e.VolumeType)
			}
			m.Ebs = ebs
		}
		d.BlockDeviceMappings = append(d.BlockDeviceMappings, m)
	}
	// Security groups go on the primary interface when the template describes interfaces, and on
	// the instance otherwise (EC2 rejects both at once).
	if c.AssociatePublicIP == nil && len(c.NetworkInterfaces) == 0 && c.ConnectionTracking == nil && c.IPPrefixCount == nil {
		d.SecurityGroupIds = c.SecurityGroupIDs
		return d
	}
	nics := c.NetworkInterfaces
	if len(nics) == 0 {
		nics = []awsv1.NetworkInterface{{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.NetworkInterfaceTypeInterface}}
	}
	for _, ni := range nics {
		spec := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			NetworkCardIndex: aws.Int32(ni.NetworkCardIndex),
			DeviceIndex:      aws.Int32(ni.DeviceIndex),
			Groups:           c.SecurityGroupIDs,
		}
		if ni.InterfaceType == awsv1.NetworkInterfaceTypeEFAOnly {
			spec.InterfaceType = aws.String("efa-only")
		} else if len(c.NetworkInterfaces) > 0 {
			spec.InterfaceType = aws.String("interface")
		}
		if ni.NetworkCardIndex == 0 && ni.DeviceIndex == 0 {
			spec.AssociatePublicIpAddress = c.AssociatePublicIP
			spec.Ipv4PrefixCount = c.IPPrefixCount
			if ct := c.ConnectionTracking; ct != nil {
				spec.ConnectionTrackingSpecification = &ec2types.ConnectionTrackingSpecificationRequest{
					TcpEstablishedTimeout: ct.TCPEstablishedTimeout, UdpStreamTimeout: ct.UDPStreamTimeout, UdpTimeout: ct.UDPTimeout,
				}
			}
		}
		d.NetworkInterfaces = append(d.NetworkInterfaces, spec)
	}
	return d
}

// launchTemplates creates the launch templates launches need, reuses them, and deletes those
// unused for a while. It is safe for concurrent use.
type launchTemplates struct {
	api         EC2API
	clusterName string
	clock       clock.PassiveClock
	idleTTL     time.Duration
	log         logr.Logger

	mu    sync.Mutex
	known map[string]*templateEntry // by name
}

type templateEntry struct {
	id       string
	lastUsed time.Time
	// ready is closed once the template exists (or creating it failed, with err set).
	ready chan struct{}
	err   error
}

func newLaunchTemplates(api EC2API, clusterName string, clk clock.PassiveClock, idleTTL time.Duration, log logr.Logger) *launchTemplates {
	if idleTTL <= 0 {
		idleTTL = DefaultLaunchTemplateIdleTTL
	}
	return &launchTemplates{api: api, clusterName: clusterName, clock: clk, idleTTL: idleTTL, log: log, known: map[string]*templateEntry{}}
}

// ensure returns the name of the launch template of the configuration, creating it when this
// process has not seen it yet (one CreateLaunchTemplate; an existing template of that name has
// the same content, since the name is its hash). Concurrent callers share one creation.
func (l *launchTemplates) ensure(ctx context.Context, c *launchTemplateConfig) (string, error) {
	name, err := c.name()
	if err != nil {
		return "", fmt.Errorf("name launch template: %w", err)
	}
	l.mu.Lock()
	e, ok := l.known[name]
	if ok {
		e.lastUsed = l.clock.Now()
		l.mu.Unlock()
		select {
		case <-e.ready:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		if e.err != nil {
			return "", e.err
		}
		return name, nil
	}
	e = &templateEntry{lastUsed: l.clock.Now(), ready: make(chan struct{})}
	l.known[name] = e
	l.mu.Unlock()

	e.id, e.err = l.create(ctx, name, c)
	close(e.ready)
	if e.err != nil {
		l.forget(name)
		return "", e.err
	}
	return name, nil
}

func (l *launchTemplates) create(ctx context.Context, name string, c *launchTemplateConfig) (string, error) {
	out, err := l.api.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: c.launchTemplateData(),
		TagSpecifications: []ec2types.TagSpecification{{
			ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags:         ec2Tags(c.Tags),
		}},
	})
	if hasCode(err, codeLaunchTemplateExists) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("create launch template %s: %w", name, err)
	}
	l.log.V(1).Info("created launch template", "name", name, "image", c.ImageID)
	return aws.ToString(out.LaunchTemplate.LaunchTemplateId), nil
}

// forget drops a template from what this process knows, so the next launch creates it again
// (after EC2 said it does not exist).
func (l *launchTemplates) forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.known, name)
}

// clusterFilter selects the launch templates of this cluster by tag.
func (l *launchTemplates) clusterFilter() ec2types.Filter {
	return ec2types.Filter{Name: aws.String("tag:" + awsv1.TagEKSClusterName), Values: []string{l.clusterName}}
}

// collect deletes this cluster's launch templates that no launch used for the idle TTL (those
// this process never used count from their creation time). The cluster's are those tagged
// eks:eks-cluster-name with its name and named by the provider or by Karpenter (whose templates
// Joiner never launches from, so they go once the idle TTL after their creation has passed, as
// Karpenter itself deletes its templates a minute after their last use). It returns the names it
// deleted.
func (l *launchTemplates) collect(ctx context.Context) ([]string, error) {
	prefixes := []string{LaunchTemplateNamePrefix + l.clusterName + "/", KarpenterLaunchTemplateNamePrefix}
	now := l.clock.Now()
	var stale []string
	pages := ec2.NewDescribeLaunchTemplatesPaginator(l.api, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{l.clusterFilter()}, MaxResults: aws.Int32(200),
	})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list launch templates: %w", err)
		}
		l.mu.Lock()
		for _, t := range out.LaunchTemplates {
			name := aws.ToString(t.LaunchTemplateName)
			if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
				continue
			}
			last := aws.ToTime(t.CreateTime)
			if e, ok := l.known[name]; ok {
				last = e.lastUsed
			}
			if now.Sub(last) > l.idleTTL {
				stale = append(stale, name)
				delete(l.known, name)
			}
		}
		l.mu.Unlock()
	}
	return stale, l.delete(ctx, stale)
}

// deleteForNodeClass deletes every launch template of the cluster made for the EC2NodeClass
// (tagged eks:eks-cluster-name and karpenter.k8s.aws/ec2nodeclass), Karpenter's included.
func (l *launchTemplates) deleteForNodeClass(ctx context.Context, nodeClass string) error {
	var names []string
	pages := ec2.NewDescribeLaunchTemplatesPaginator(l.api, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{l.clusterFilter(), {Name: aws.String("tag:" + awsv1.TagNodeClass), Values: []string{nodeClass}}},
	})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list launch templates of EC2NodeClass %s: %w", nodeClass, err)
		}
		for _, t := range out.LaunchTemplates {
			names = append(names, aws.ToString(t.LaunchTemplateName))
		}
	}
	l.mu.Lock()
	for _, n := range names {
		delete(l.known, n)
	}
	l.mu.Unlock()
	return l.delete(ctx, names)
}

func (l *launchTemplates) delete(ctx context.Context, names []string) error {
	var firstErr error
	for _, n := range names {
		_, err := l.api.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(n)})
		if err != nil && !hasCode(err, codeLaunchTemplateNotFound, codeLaunchTemplateIDNotFnd) {
			if firstErr == nil {
				firstErr = fmt.Errorf("delete launch template %s: %w", n, err)
			}
			continue
		}
		l.log.V(1).Info("deleted launch template", "name", n)
	}
	return firstErr
}

// ec2Tags converts a tag map to EC2 tags, sorted by key.
func ec2Tags(m map[string]string) []ec2types.Tag {
	keys := slices.Sorted(maps.Keys(m))
	out := make([]ec2types.Tag, len(keys))
	for i, k := range keys {
		out[i] = ec2types.Tag{Key: aws.String(k), Value: aws.String(m[k])}
	}
	return out
}

// encodeUserData base64-encodes user data for a launch template.
func encodeUserData(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
