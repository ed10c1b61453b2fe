package local

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mitchellh/hashstructure/v2"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/catalog"
)

// Defaults of a LocalNodeClass spec, as the CRD sets them; applied again here for objects that
// never went through the API server.
const (
	// DefaultRegion is the region of a LocalNodeClass without spec.region.
	DefaultRegion = "us-east-1"
	// DefaultNodeRegistrationDelay is the registration delay of a LocalNodeClass without
	// spec.nodeRegistrationDelay.
	DefaultNodeRegistrationDelay = 2 * time.Second
)

// NodeClassKind is the kind of node class the local provider serves, in group
// joinerv1alpha1.GroupVersion.Group.
const NodeClassKind = "LocalNodeClass"

// Reasons of a NodeClassError, usable as condition reasons.
const (
	// ReasonRegionNotFound means spec.region is not a region of the catalog.
	ReasonRegionNotFound = "RegionNotFound"
	// ReasonZoneNotFound means an entry of spec.zones is not a zone of the region.
	ReasonZoneNotFound = "ZoneNotFound"
)

// NodeClassError says why a LocalNodeClass spec does not resolve against the catalog. It names
// the offending field and lists the valid values.
type NodeClassError struct {
	// Reason is ReasonRegionNotFound or ReasonZoneNotFound.
	Reason string
	// Field is the path of the offending field, such as "spec.zones[1]".
	Field string
	// Detail says what is wrong with the field and what the valid values are.
	Detail string
}

// Error returns "<field>: <detail>".
func (e *NodeClassError) Error() string { return e.Field + ": " + e.Detail }

// ResolvedNodeClass is a LocalNodeClass spec with its defaults applied and its region and zones
// checked against the catalog.
type ResolvedNodeClass struct {
	// Name is the LocalNodeClass's name.
	Name string
	// Region is the catalog region.
	Region string
	// Zones are the zones of the region the class offers, in the catalog's (name) order.
	Zones []string
	// RegistrationDelay is how long a launched instance takes to create its Node.
	RegistrationDelay time.Duration
	// Labels are added to every Node launched with the class.
	Labels map[string]string
}

// Annotations with which Create stamps a launched NodeClaim with the hash of its LocalNodeClass,
// which IsDrifted compares with the class's current hash.
const (
	// NodeClassHashAnnotationKey holds ResolvedNodeClass.Hash of the class at launch.
	NodeClassHashAnnotationKey = "joiner.dev/localnodeclass-hash"
	// NodeClassHashVersionAnnotationKey holds the NodeClassHashVersion the hash was made with.
	NodeClassHashVersionAnnotationKey = "joiner.dev/localnodeclass-hash-version"
)

// NodeClassHashVersion is the version of ResolvedNodeClass.Hash. Bump it whenever the hash of an
// unchanged class would change (a field added to or removed from the hash, a new default), so
// that the change is not taken for drift.
const NodeClassHashVersion = "v1"

// Hash returns the hash of the fields of the class that shape a node and that the zone check of
// IsDrifted does not cover: the labels. Region and zones are left out (a zone that stays offered
// is no drift); the registration delay shapes no node.
func (rc ResolvedNodeClass) Hash() string {
	h, err := hashstructure.Hash(struct{ Labels map[string]string }{rc.Labels}, hashstructure.FormatV2,
		&hashstructure.HashOptions{SlicesAsSets: true, IgnoreZeroValue: true, ZeroNil: true})
	if err != nil {
		// Only values hashstructure cannot walk (channels, functions) fail, and labels hold none.
		panic(fmt.Sprintf("hash LocalNodeClass %s: %v", rc.Name, err))
	}
	return strconv.FormatUint(h, 10)
}

// Resolve applies the defaults of the LocalNodeClass and checks its region and zones against the
// catalog. Its error is a *NodeClassError naming the field, for example
// "spec.zones[1]: us-east-1z is not a zone of us-east-1; valid zones: us-east-1a, ...".
func Resolve(cat *catalog.Catalog, nodeClass *joinerv1alpha1.LocalNodeClass) (ResolvedNodeClass, error) {
	spec := nodeClass.Spec
	rc := ResolvedNodeClass{
		Name:              nodeClass.Name,
		Region:            spec.Region,
		RegistrationDelay: DefaultNodeRegistrationDelay,
		Labels:            maps.Clone(spec.Labels),
	}
	if rc.Region == "" {
		rc.Region = DefaultRegion
	}
	if d := spec.NodeRegistrationDelay; d != nil {
		rc.RegistrationDelay = max(d.Duration, 0)
	}
	regionZones := cat.Zones(rc.Region)
	if len(regionZones) == 0 {
		return ResolvedNodeClass{}, &NodeClassError{
			Reason: ReasonRegionNotFound,
			Field:  "spec.region",
			Detail: fmt.Sprintf("%s is not a region of the catalog; valid regions: %s", rc.Region, strings.Join(cat.Regions(), ", ")),
		}
	}
	valid := make([]string, len(regionZones))
	for i, z := range regionZones {
		valid[i] = z.Name
	}
	if len(spec.Zones) == 0 {
		rc.Zones = valid
		return rc, nil
	}
	for i, z := range spec.Zones {
		if !slices.Contains(valid, z) {
			return ResolvedNodeClass{}, &NodeClassError{
				Reason: ReasonZoneNotFound,
				Field:  fmt.Sprintf("spec.zones[%d]", i),
				Detail: fmt.Sprintf("%s is not a zone of %s; valid zones: %s", z, rc.Region, strings.Join(valid, ", ")),
			}
		}
	}
	for _, z := range valid {
		if slices.Contains(spec.Zones, z) {
			rc.Zones = append(rc.Zones, z)
		}
	}
	return rc, nil
}

// nodeClass reads and resolves the LocalNodeClass a nodeClassRef points to. owner names the
// object holding the reference, for error messages. A missing, deleted or unresolvable class is a
// *cloudprovider.NodeClassNotReadyError; a reference to another kind of class is a plain error.
func (p *Provider) nodeClass(ctx context.Context, ref *karpv1.NodeClassReference, owner string) (ResolvedNodeClass, error) {
	if ref == nil {
		return ResolvedNodeClass{}, fmt.Errorf("%s has no nodeClassRef; set it to group %s, kind %s and the name of a %s",
			owner, joinerv1alpha1.GroupVersion.Group, NodeClassKind, NodeClassKind)
	}
	if ref.Group != joinerv1alpha1.GroupVersion.Group || ref.Kind != NodeClassKind {
		return ResolvedNodeClass{}, fmt.Errorf("%s: nodeClassRef names a %s of group %q, but the local provider serves only %s of group %s",
			owner, ref.Kind, ref.Group, NodeClassKind, joinerv1alpha1.GroupVersion.Group)
	}
	nc := &joinerv1alpha1.LocalNodeClass{}
	if err := p.kube.Get(ctx, types.NamespacedName{Name: ref.Name}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return ResolvedNodeClass{}, cloudprovider.NewNodeClassNotReadyError(
				fmt.Errorf("%s: LocalNodeClass %q not found; create it or fix nodeClassRef.name", owner, ref.Name))
		}
		return ResolvedNodeClass{}, fmt.Errorf("%s: get LocalNodeClass %q: %w", owner, ref.Name, err)
	}
	if !nc.DeletionTimestamp.IsZero() {
		return ResolvedNodeClass{}, cloudprovider.NewNodeClassNotReadyError(
			fmt.Errorf("%s: LocalNodeClass %q is being deleted", owner, ref.Name))
	}
	rc, err := Resolve(p.catalog, nc)
	if err != nil {
		return ResolvedNodeClass{}, cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("%s: LocalNodeClass %q: %w", owner, ref.Name, err))
	}
	return rc, nil
}
