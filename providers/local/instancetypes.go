package local

import (
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/catalog"
	"github.com/joiner-dev/joiner/requirements"
)

// Extended resources of GPU instance types.
const (
	// ResourceNvidiaGPU is the resource name of NVIDIA GPUs.
	ResourceNvidiaGPU corev1.ResourceName = "nvidia.com/gpu"
	// ResourceAMDGPU is the resource name of AMD GPUs.
	ResourceAMDGPU corev1.ResourceName = "amd.com/gpu"
)

// The node model, following the AWS provider's documented defaults for AL2023 nodes.
const (
	// defaultMaxPods is the pod capacity of a type without an ENI-derived limit.
	defaultMaxPods = 110
	// ephemeralStorageGi is the size of the root volume.
	ephemeralStorageGi = 20
	// kubeReservedEphemeralGi is the ephemeral storage kube-reserved.
	kubeReservedEphemeralGi = 1
	// evictionMemoryMi is the kubelet's evictionHard memory.available.
	evictionMemoryMi = 100
	// evictionEphemeralPercent is the kubelet's evictionHard nodefs.available.
	evictionEphemeralPercent = 10
)

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

// capacityOf returns the capacity of a node of the catalog type: its vCPUs; its memory less the
// VM overhead (7.5%, rounded up) and, on arm64, 64 MiB for the kernel; its ENI-limited pod count;
// a 20Gi root volume; and its GPUs as nvidia.com/gpu or amd.com/gpu.
func capacityOf(t *catalog.InstanceType) corev1.ResourceList {
	memMiB := cloudprovider.NodeMemoryMiB(t.MemoryMiB, cloudprovider.DefaultVMMemoryOverheadPercent, t.Architectures)
	c := corev1.ResourceList{
		corev1.ResourceCPU:              *resource.NewQuantity(int64(t.VCPU), resource.DecimalSI),
		corev1.ResourceMemory:           *resource.NewQuantity(memMiB*mi, resource.BinarySI),
		corev1.ResourcePods:             *resource.NewQuantity(int64(maxPods(t)), resource.DecimalSI),
		corev1.ResourceEphemeralStorage: *resource.NewQuantity(ephemeralStorageGi*gi, resource.BinarySI),
	}
	if t.GPUCount > 0 {
		switch strings.ToLower(t.GPUManufacturer) {
		case "nvidia":
			c[ResourceNvidiaGPU] = *resource.NewQuantity(int64(t.GPUCount), resource.DecimalSI)
		case "amd":
			c[ResourceAMDGPU] = *resource.NewQuantity(int64(t.GPUCount), resource.DecimalSI)
		}
	}
	return c
}

func maxPods(t *catalog.InstanceType) int {
	if t.MaxPods > 0 {
		return t.MaxPods
	}
	return defaultMaxPods
}

// overheadOf returns the reservations of a node of the catalog type, by the AWS provider's
// formulas: kube-reserved cpu by cloudprovider.KubeReservedMilliCPU; kube-reserved memory
// 11 MiB per pod plus 255 MiB; kube-reserved ephemeral storage 1Gi; no system-reserved; and
// evictionHard memory 100Mi and ephemeral storage 10% of the root volume.
func overheadOf(t *catalog.InstanceType) cloudprovider.Overhead {
	return cloudprovider.Overhead{
		KubeReserved: corev1.ResourceList{
			corev1.ResourceCPU:              *resource.NewMilliQuantity(cloudprovider.KubeReservedMilliCPU(t.VCPU), resource.DecimalSI),
			corev1.ResourceMemory:           *resource.NewQuantity((11*int64(maxPods(t))+255)*mi, resource.BinarySI),
			corev1.ResourceEphemeralStorage: *resource.NewQuantity(kubeReservedEphemeralGi*gi, resource.BinarySI),
		},
		EvictionThreshold: corev1.ResourceList{
			corev1.ResourceMemory:           *resource.NewQuantity(evictionMemoryMi*mi, resource.BinarySI),
			corev1.ResourceEphemeralStorage: *resource.NewQuantity(ceilDiv(ephemeralStorageGi*gi*evictionEphemeralPercent, 100), resource.BinarySI),
		},
	}
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

// optionalLabels returns the catalog's labels that only some instance types carry.
func optionalLabels() []string {
	return []string{
		catalog.LabelInstanceGPUName,
		catalog.LabelInstanceGPUManufacturer,
		catalog.LabelInstanceGPUCount,
		catalog.LabelInstanceGPUMemory,
		catalog.LabelInstanceHypervisor,
		catalog.LabelInstanceLocalNVMe,
		catalog.LabelInstanceNetworkBandwidth,
	}
}

// typeTemplate is the zone-independent part of an instance type of one region: built once per
// region and reused for every node class in it.
type typeTemplate struct {
	info     catalog.InstanceType
	labels   map[string]string
	capacity corev1.ResourceList
	overhead cloudprovider.Overhead
	// base holds the requirements that do not depend on zones or availability: one In per
	// label of the type, and the region.
	base []requirements.Requirement
}

func newTypeTemplate(region string, info catalog.InstanceType) typeTemplate {
	labels := info.Labels()
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	optional := optionalLabels()
	base := make([]requirements.Requirement, 0, len(keys)+len(optional)+1)
	for _, k := range keys {
		base = append(base, requirements.In(k, labels[k]))
	}
	// A label the type does not carry must be absent, so that a NodeClaim requiring, say, a GPU
	// name conflicts with types without GPUs instead of ignoring the key.
	for _, k := range optional {
		if _, ok := labels[k]; !ok {
			base = append(base, requirements.DoesNotExist(k))
		}
	}
	base = append(base, requirements.In(karpv1.LabelTopologyRegion, region))
	return typeTemplate{
		info:     info,
		labels:   labels,
		capacity: capacityOf(&info),
		overhead: overheadOf(&info),
		base:     base,
	}
}

// build returns the instance type restricted to zones, or nil when it is offered in none of them.
// short reports the offerings to mark unavailable.
func (tt *typeTemplate) build(zones []string, short func(instanceType, zone, capacityType string) bool) *cloudprovider.InstanceType {
	var offerings cloudprovider.Offerings
	var offeredZones, zoneIDs, capacityTypes []string
	for _, o := range tt.info.Offerings {
		if !slices.Contains(zones, o.Zone) {
			continue
		}
		reqs := requirements.New(
			requirements.In(karpv1.LabelTopologyZone, o.Zone),
			requirements.In(karpv1.CapacityTypeLabelKey, o.CapacityType),
		)
		if o.ZoneID != "" {
			reqs.Add(requirements.In(catalog.LabelZoneID, o.ZoneID))
			zoneIDs = appendUnique(zoneIDs, o.ZoneID)
		}
		offerings = append(offerings, &cloudprovider.Offering{
			Requirements: reqs,
			Price:        o.Price,
			Available:    o.Available && !short(tt.info.Name, o.Zone, o.CapacityType),
		})
		offeredZones = appendUnique(offeredZones, o.Zone)
		capacityTypes = appendUnique(capacityTypes, o.CapacityType)
	}
	if len(offerings) == 0 {
		return nil
	}
	reqs := requirements.New(tt.base...)
	reqs.Add(
		requirements.In(karpv1.LabelTopologyZone, offeredZones...),
		requirements.In(karpv1.CapacityTypeLabelKey, capacityTypes...),
	)
	if len(zoneIDs) > 0 {
		reqs.Add(requirements.In(catalog.LabelZoneID, zoneIDs...))
	}
	return &cloudprovider.InstanceType{
		Name:         tt.info.Name,
		Requirements: reqs,
		Offerings:    offerings,
		Capacity:     tt.capacity.DeepCopy(),
		Overhead: cloudprovider.Overhead{
			KubeReserved:      tt.overhead.KubeReserved.DeepCopy(),
			SystemReserved:    tt.overhead.SystemReserved.DeepCopy(),
			EvictionThreshold: tt.overhead.EvictionThreshold.DeepCopy(),
		},
	}
}

func appendUnique(list []string, v string) []string {
	if slices.Contains(list, v) {
		return list
	}
	return append(list, v)
}

// typeCache caches the templates of each region and the instance types built for each set of
// zones, rebuilding the latter when the injected shortages change.
type typeCache struct {
	catalog *catalog.Catalog

	mu        sync.Mutex
	templates map[string][]typeTemplate // region -> templates
	built     map[string]builtTypes     // region and zones -> types
}

type builtTypes struct {
	shortageVersion uint64
	types           cloudprovider.InstanceTypes
	templates       map[string]*typeTemplate // by type name, for launching
}

func newTypeCache(cat *catalog.Catalog) *typeCache {
	return &typeCache{catalog: cat, templates: map[string][]typeTemplate{}, built: map[string]builtTypes{}}
}

// get returns the instance types of the region offered in zones, and the templates by name.
// The result is shared between callers and must not be modified.
func (c *typeCache) get(region string, zones []string, failures *Failures) builtTypes {
	key := region + "/" + strings.Join(zones, ",")
	version := failures.shortageVersion()
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.built[key]; ok && b.shortageVersion == version {
		return b
	}
	tmpls, ok := c.templates[region]
	if !ok {
		infos := c.catalog.InstanceTypes(region)
		tmpls = make([]typeTemplate, len(infos))
		for i, info := range infos {
			tmpls[i] = newTypeTemplate(region, info)
		}
		c.templates[region] = tmpls
	}
	short := func(it, zone, ct string) bool { return failures.short(it, zone, ct, true) }
	b := builtTypes{shortageVersion: version, templates: make(map[string]*typeTemplate, len(tmpls))}
	for i := range tmpls {
		if it := tmpls[i].build(zones, short); it != nil {
			b.types = append(b.types, it)
			b.templates[it.Name] = &tmpls[i]
		}
	}
	c.built[key] = b
	return b
}
