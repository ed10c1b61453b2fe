// Package schema defines the on-disk layout of the embedded instance-type
// catalog (catalog.json.gz). It is shared by the generator (which writes it)
// and by package catalog (which reads it), so that the two cannot drift apart.
//
// The file is gzip-compressed JSON. Every list is sorted (regions and zones by
// name, types by name, per-type region entries by region name, zones inside a
// region entry by zone name) so that the same inputs always produce the same
// bytes.
package schema

// Version is the schema version written into and checked against the file.
// Bump it whenever the layout changes incompatibly.
const Version = 1

// File is the root object of the catalog file.
type File struct {
	// Schema is the layout version; readers reject files with another value.
	Schema int `json:"schema"`
	// Sources records where the data came from.
	Sources []Source `json:"sources"`
	// Regions lists the covered regions and their availability zones.
	Regions []Region `json:"regions"`
	// Types lists the instance types, sorted by name.
	Types []Type `json:"types"`
}

// Source describes one input dataset.
type Source struct {
	// Name identifies the dataset, e.g. "moto" or "github.com/cristim/ec2-instances-info".
	Name string `json:"name"`
	// Version is the dataset's release or module version.
	Version string `json:"version"`
	// License is the SPDX identifier of the data's licence.
	License string `json:"license"`
	// Files lists the files read from the dataset, relative to its root.
	Files []string `json:"files"`
}

// Region is one AWS region with its availability zones.
type Region struct {
	// Name is the region code, e.g. "us-east-1".
	Name string `json:"name"`
	// Zones lists the region's availability zones, sorted by name.
	Zones []Zone `json:"zones"`
}

// Zone is one availability zone.
type Zone struct {
	// Name is the zone name, e.g. "us-east-1a".
	Name string `json:"name"`
	// ID is the zone ID, e.g. "use1-az6" (may be empty when unknown).
	ID string `json:"id,omitempty"`
}

// Type holds the specification of one instance type and its prices per
// region. Units are given in the field names: MiB for memory, GB (10^9 bytes)
// for local storage, Mbps for network bandwidth, USD per hour for prices.
type Type struct {
	// Name is the instance type, e.g. "m5.large".
	Name string `json:"name"`
	// Category is the leading letters of the family, e.g. "m".
	Category string `json:"category"`
	// Family is the part before the dot, e.g. "m5" or "c7i-flex".
	Family string `json:"family"`
	// Generation is the number following the category, e.g. 5.
	Generation int `json:"generation"`
	// Size is the part after the dot, e.g. "large" or "metal-24xl".
	Size string `json:"size"`
	// Architectures lists Kubernetes architecture names (amd64, arm64).
	Architectures []string `json:"architectures"`
	// CPUManufacturer is the processor vendor, e.g. "Intel".
	CPUManufacturer string `json:"cpuManufacturer,omitempty"`
	// VCPU is the default number of vCPUs.
	VCPU int `json:"vcpu"`
	// MemoryMiB is the memory size in MiB.
	MemoryMiB int64 `json:"memoryMiB"`
	// GPU is nil for types without GPUs.
	GPU *GPU `json:"gpu,omitempty"`
	// Hypervisor is "nitro" or "xen"; empty for bare metal.
	Hypervisor string `json:"hypervisor,omitempty"`
	// BareMetal is true for *.metal* types.
	BareMetal bool `json:"bareMetal,omitempty"`
	// NetworkBandwidthMbps is the baseline bandwidth of the default network
	// card in Mbps.
	NetworkBandwidthMbps int64 `json:"networkBandwidthMbps"`
	// LocalNVMeGB is the total NVMe instance-store size in GB (0 if none).
	LocalNVMeGB int64 `json:"localNVMeGB,omitempty"`
	// MaxENIs is the number of network interfaces of the default card.
	MaxENIs int `json:"maxENIs"`
	// IPv4PerENI is the number of IPv4 addresses per interface.
	IPv4PerENI int `json:"ipv4PerENI"`
	// MaxPods is MaxENIs*(IPv4PerENI-1)+2.
	MaxPods int `json:"maxPods"`
	// SpotSupported tells whether the type can be launched as spot.
	SpotSupported bool `json:"spotSupported"`
	// Regions holds the offerings per region, sorted by region.
	Regions []Prices `json:"regions"`
}

// GPU describes the accelerators of a type (all types in the catalog carry at
// most one GPU model).
type GPU struct {
	// Count is the number of GPUs.
	Count int `json:"count"`
	// Name is the GPU model as reported by EC2, e.g. "A10G".
	Name string `json:"name"`
	// Manufacturer is the GPU vendor as reported by EC2, e.g. "NVIDIA".
	Manufacturer string `json:"manufacturer"`
	// MemoryMiB is the memory of one GPU.
	MemoryMiB int64 `json:"memoryMiB"`
}

// Prices holds the offerings of one type in one region.
type Prices struct {
	// Region is the region code.
	Region string `json:"region"`
	// OnDemand is the Linux on-demand price in USD per hour; 0 means the
	// price dataset has no figure for this region.
	OnDemand float64 `json:"onDemand,omitempty"`
	// Zones lists the zones the type is offered in, sorted by name.
	Zones []string `json:"zones"`
	// Spot holds the spot price in USD per hour for each entry of Zones (same
	// index); it is empty when the type does not support spot.
	Spot []float64 `json:"spot,omitempty"`
	// SpotSource tells how Spot was obtained; see the Spot* constants.
	SpotSource string `json:"spotSource,omitempty"`
}

// How spot prices were obtained.
const (
	// SpotZonal means the dataset had a per-zone price list that was spread
	// over the zones deterministically (the dataset does not name the zones).
	SpotZonal = "zonal"
	// SpotRegional means the dataset had only a regional average, jittered
	// deterministically per zone.
	SpotRegional = "regional"
	// SpotDerived means the dataset had no spot figure and the price was
	// derived from the on-demand price.
	SpotDerived = "derived"
)
