package fake

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"
)

// Labels the fake instance types carry besides the well-known ones. No real provider uses them;
// tests select on them to exercise custom labels.
const (
	// LabelSize is "small" for types with at most 4 cpus or 8Gi, "large" otherwise.
	LabelSize = "size"
	// LabelSpecial is "optional" on large types and absent on small ones.
	LabelSpecial = "special"
	// LabelInteger is the type's cpu count as a decimal integer, for Gt/Lt tests.
	LabelInteger = "integer"
)

// Zones of the fake offerings.
const (
	// Zone1 has spot and on-demand offerings.
	Zone1 = "test-zone-1"
	// Zone2 has spot and on-demand offerings.
	Zone2 = "test-zone-2"
	// Zone3 has on-demand offerings only.
	Zone3 = "test-zone-3"
)

// InstanceTypeOptions describe one fake instance type; zero fields take the defaults of
// NewInstanceType.
type InstanceTypeOptions struct {
	// Name defaults to a name derived from the capacity.
	Name string
	// Capacity defaults to 4 cpu, 4Gi memory and 5 pods; missing cpu, memory or pods are added.
	Capacity corev1.ResourceList
	// Overhead defaults to kubeReserved 100m cpu and 10Mi memory.
	Overhead *cloudprovider.Overhead
	// Architecture defaults to amd64.
	Architecture string
	// OperatingSystems default to darwin, linux and windows.
	OperatingSystems []string
	// Offerings default to spot in test-zone-1 and -2 and on-demand in test-zone-1, -2 and -3,
	// all available at PriceFromResources(Capacity).
	Offerings cloudprovider.Offerings
}

// PriceFromResources is the fake price of a capacity: 0.1 $/h per cpu plus 0.1 $/h per 10⁹ bytes
// of memory, in float64.
func PriceFromResources(capacity corev1.ResourceList) float64 {
	price := 0.0
	if cpu, ok := capacity[corev1.ResourceCPU]; ok {
		price += 0.1 * cpu.AsApproximateFloat64()
	}
	if mem, ok := capacity[corev1.ResourceMemory]; ok {
		price += 0.1 * mem.AsApproximateFloat64() / 1e9
	}
	return price
}

// DefaultOfferings returns the five default offerings at price: spot in test-zone-1 and -2,
// on-demand in test-zone-1, -2 and -3, all available.
func DefaultOfferings(price float64) cloudprovider.Offerings {
	return cloudprovider.Offerings{
		cloudprovider.NewOffering(Zone1, karpv1.CapacityTypeSpot, price, true),
		cloudprovider.NewOffering(Zone2, karpv1.CapacityTypeSpot, price, true),
		cloudprovider.NewOffering(Zone1, karpv1.CapacityTypeOnDemand, price, true),
		cloudprovider.NewOffering(Zone2, karpv1.CapacityTypeOnDemand, price, true),
		cloudprovider.NewOffering(Zone3, karpv1.CapacityTypeOnDemand, price, true),
	}
}

// NewInstanceType returns a fake instance type. Its requirements fix the instance type, arch,
// integer (cpu count), size and special labels, and allow the zones and capacity types of its
// offerings and the given operating systems.
func NewInstanceType(opts InstanceTypeOptions) *cloudprovider.InstanceType {
	capacity := corev1.ResourceList{}
	for k, v := range opts.Capacity {
		capacity[k] = v.DeepCopy()
	}
	setDefault := func(name corev1.ResourceName, q string) {
		if _, ok := capacity[name]; !ok {
			capacity[name] = resource.MustParse(q)
		}
	}
	setDefault(corev1.ResourceCPU, "4")
	setDefault(corev1.ResourceMemory, "4Gi")
	setDefault(corev1.ResourcePods, "5")
	cpu, mem := capacity[corev1.ResourceCPU], capacity[corev1.ResourceMemory]
	if opts.Name == "" {
		opts.Name = fmt.Sprintf("fake-%s-%s", cpu.String(), mem.String())
	}
	if opts.Architecture == "" {
		opts.Architecture = karpv1.ArchitectureAmd64
	}
	if opts.OperatingSystems == nil {
		opts.OperatingSystems = []string{"darwin", karpv1.OSLinux, "windows"}
	}
	if opts.Offerings == nil {
		opts.Offerings = DefaultOfferings(PriceFromResources(capacity))
	}
	overhead := cloudprovider.Overhead{KubeReserved: corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("100m"),
		corev1.ResourceMemory: resource.MustParse("10Mi"),
	}}
	if opts.Overhead != nil {
		overhead = *opts.Overhead
	}
	var zones, capacityTypes []string
	for _, o := range opts.Offerings {
		zones = append(zones, o.Zone())
		capacityTypes = append(capacityTypes, o.CapacityType())
	}
	size, special := "small", requirements.DoesNotExist(LabelSpecial)
	if cpu.Cmp(resource.MustParse("4")) > 0 && mem.Cmp(resource.MustParse("8Gi")) > 0 {
		size, special = "large", requirements.In(LabelSpecial, "optional")
	}
	return &cloudprovider.InstanceType{
		Name: opts.Name,
		Requirements: requirements.New(
			requirements.In(karpv1.LabelInstanceType, opts.Name),
			requirements.In(karpv1.LabelArch, opts.Architecture),
			requirements.In(karpv1.LabelOS, opts.OperatingSystems...),
			requirements.In(karpv1.LabelTopologyZone, zones...),
			requirements.In(karpv1.CapacityTypeLabelKey, capacityTypes...),
			requirements.In(LabelInteger, strconv.FormatInt(cpu.Value(), 10)),
			requirements.In(LabelSize, size),
			special,
		),
		Offerings: opts.Offerings,
		Capacity:  capacity,
		Overhead:  overhead,
	}
}

// InstanceTypes returns the n synthetic types of the scheduling benchmark: fake-it-<i> for
// i = 0..n-1 with i+1 cpus, 2(i+1) GiB of memory and 10(i+1) pods, kubeReserved 100m and 10Mi,
// and the five default offerings at PriceFromResources. The best price per cpu and per GiB is the
// largest type; price per pod is the same for all.
func InstanceTypes(n int) []*cloudprovider.InstanceType {
	out := make([]*cloudprovider.InstanceType, n)
	for i := range n {
		size := int64(i + 1)
		out[i] = NewInstanceType(InstanceTypeOptions{
			Name: fmt.Sprintf("fake-it-%d", i),
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    *resource.NewQuantity(size, resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(2*size*(1<<30), resource.BinarySI),
				corev1.ResourcePods:   *resource.NewQuantity(10*size, resource.DecimalSI),
			},
		})
	}
	return out
}
