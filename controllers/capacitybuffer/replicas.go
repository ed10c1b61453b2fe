package capacitybuffer

import (
	"fmt"
	"math"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	autoscalingv1beta1 "github.com/joiner-dev/joiner/api/autoscaling/v1beta1"
)

// Replicas is the number of units a buffer keeps free (Karpenter v1.14's rule): the larger of
// spec.replicas and spec.percentage of the scalable's replicas (rounded up, and at least one
// when both are above zero), capped by spec.limits at the fewest units whose requests fit every
// limited resource; with neither count set, as many units as fit the limits. scalable is nil for a
// buffer without scalableRef (percentage then counts nothing); unit is one unit's requests. A
// buffer that sets no count and no limit that bounds its units is an error naming the field.
func Replicas(spec *autoscalingv1beta1.CapacityBufferSpec, scalable *int32, unit corev1.ResourceList) (int32, error) {
	counted := false
	var n int64
	if spec.Replicas != nil {
		counted, n = true, int64(max(*spec.Replicas, 0))
	}
	if spec.Percentage != nil && scalable != nil {
		counted = true
		pct, base := int64(max(*spec.Percentage, 0)), int64(max(*scalable, 0))
		share := (base*pct + 99) / 100
		if base > 0 && pct > 0 {
			share = max(share, 1)
		}
		n = max(n, share)
	}
	if spec.Limits == nil {
		if !counted {
			return 0, fmt.Errorf("spec: set spec.replicas, spec.percentage (with spec.scalableRef) or spec.limits")
		}
		return int32(min(n, math.MaxInt32)), nil
	}
	fit, bounded, err := fitLimits(*spec.Limits, unit)
	if err != nil {
		return 0, err
	}
	switch {
	case !counted && !bounded:
		return 0, fmt.Errorf("spec.limits: the pod template requests none of the limited resources (%s), so the limits bound no number of units; set spec.replicas", limitNames(*spec.Limits))
	case !counted:
		n = fit
	case bounded:
		n = min(n, fit)
	}
	return int32(min(n, math.MaxInt32)), nil
}

// fitLimits returns how many units fit every limit on a resource the unit requests, and whether
// any limit bounds them at all.
func fitLimits(limits autoscalingv1beta1.ResourceList, unit corev1.ResourceList) (int64, bool, error) {
	fit, bounded := int64(math.MaxInt64), false
	for name, limit := range limits {
		if limit.Sign() < 0 {
			return 0, false, fmt.Errorf("spec.limits.%s: %s is negative", name, limit.String())
		}
		req, ok := unit[corev1.ResourceName(name)]
		if !ok || req.IsZero() {
			continue
		}
		bounded = true
		// Compare in milli-units so that fractional cpu counts exactly.
		units := limit.MilliValue() / max(req.MilliValue(), 1)
		if limit.Value() > math.MaxInt64/1000 {
			units = limit.Value() / max(req.Value(), 1)
		}
		fit = min(fit, units)
	}
	return fit, bounded, nil
}

func limitNames(limits autoscalingv1beta1.ResourceList) string {
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, string(name))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}
