package webhooks

import (
	"context"
	"fmt"
	"strings"

	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
)

// localNodeClass checks that every zone of a LocalNodeClass belongs to its region (the default region
// when unset), which the CRD's per-item pattern cannot relate.
func localNodeClass(_ context.Context, req *Request, obj *Object) (findings, error) {
	var f findings
	lnc, err := typedView[v1alpha1.LocalNodeClass](obj)
	if err != nil {
		return f, fmt.Errorf("decode LocalNodeClass %q: %w", req.Name, err)
	}
	region := lnc.Spec.Region
	if region == "" {
		region = DefaultLocalRegion
	}
	for i, zone := range lnc.Spec.Zones {
		if !zoneOfRegion(zone, region) {
			f.deny(fmt.Sprintf("spec.zones[%d]: %q is not a zone of region %q; use zones named %s followed by a letter, such as %sa, or change spec.region",
				i, zone, region, region, region))
		}
	}
	return f, nil
}

// zoneOfRegion reports whether zone is region followed by one or more lower-case letters.
func zoneOfRegion(zone, region string) bool {
	suffix, ok := strings.CutPrefix(zone, region)
	if !ok || suffix == "" {
		return false
	}
	for _, r := range suffix {
		if r < 'a' || r > 'z' {
			return false
		}
	}
	return true
}
