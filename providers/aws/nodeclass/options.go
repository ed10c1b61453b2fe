package nodeclass

import (
	"context"
	"time"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// Defaults of Options; the cache TTLs follow the AWS provider's (reference §2.4).
const (
	DefaultResyncPeriod           = time.Minute
	DefaultSubnetTTL              = time.Minute
	DefaultSecurityGroupTTL       = time.Minute
	DefaultAMITTL                 = time.Minute
	DefaultSSMTTL                 = 24 * time.Hour
	DefaultCapacityReservationTTL = time.Minute
	DefaultInstanceProfileTTL     = 15 * time.Minute
	DefaultNodeClaimWaitPeriod    = 10 * time.Second
)

// Options configure the controller. The zero value of each field means its default; ClusterName
// and Region are required.
type Options struct {
	// ClusterName names the cluster in instance profile names, paths and tags.
	ClusterName string
	// Region is the AWS region, used in instance profile names and paths.
	Region string
	// KubernetesVersion returns the cluster's Kubernetes version as "1.36"; alias terms select
	// the AMIs published for it. Nil means alias terms cannot resolve (AMIsReady=False says so).
	// VersionFromDiscovery builds one from the apiserver.
	KubernetesVersion func(context.Context) (string, error)
	// DisableCapacityReservations leaves capacityReservationSelectorTerms unresolved and the
	// CapacityReservationsReady condition unset (Karpenter's ReservedCapacity feature gate off).
	DisableCapacityReservations bool
	// Cleanup runs while a class is being deleted, after its NodeClaims are gone and before the
	// instance profile is deleted and the finalizer removed; the provider deletes its launch
	// templates here. An error is retried with backoff.
	Cleanup func(ctx context.Context, nc *awsv1.EC2NodeClass) error
	// ResyncPeriod is how often a class is resolved again without a change of its own. Zero
	// means DefaultResyncPeriod.
	ResyncPeriod time.Duration
	// NodeClaimWaitPeriod is how often a class being deleted checks again for its NodeClaims
	// (their deletion also triggers a check). Zero means DefaultNodeClaimWaitPeriod.
	NodeClaimWaitPeriod time.Duration
	// Cache TTLs; zero means the Default...TTL constants.
	SubnetTTL, SecurityGroupTTL, AMITTL, SSMTTL, CapacityReservationTTL, InstanceProfileTTL time.Duration
}

func (o Options) withDefaults() Options {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.ResyncPeriod, DefaultResyncPeriod)
	def(&o.NodeClaimWaitPeriod, DefaultNodeClaimWaitPeriod)
	def(&o.SubnetTTL, DefaultSubnetTTL)
	def(&o.SecurityGroupTTL, DefaultSecurityGroupTTL)
	def(&o.AMITTL, DefaultAMITTL)
	def(&o.SSMTTL, DefaultSSMTTL)
	def(&o.CapacityReservationTTL, DefaultCapacityReservationTTL)
	def(&o.InstanceProfileTTL, DefaultInstanceProfileTTL)
	return o
}
