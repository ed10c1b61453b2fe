package v1

import (
	"k8s.io/apimachinery/pkg/api/resource"
)

// BlockDeviceMapping is one block device of the launch template.
type BlockDeviceMapping struct {
	// DeviceName is the device name, for example /dev/xvda or xvdh.
	// +optional
	DeviceName *string `json:"deviceName,omitempty"`

	// EBS sets up an EBS volume for the device.
	//
	// +kubebuilder:validation:XValidation:message="snapshotID or volumeSize must be defined",rule="has(self.snapshotID) || has(self.volumeSize)"
	// +kubebuilder:validation:XValidation:message="snapshotID must be set when volumeInitializationRate is set",rule="!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')"
	// +optional
	EBS *BlockDevice `json:"ebs,omitempty"`

	// RootVolume marks the device that holds the kubelet root directory; its size becomes the node's
	// ephemeral-storage capacity. At most one mapping may set it.
	// +optional
	RootVolume bool `json:"rootVolume,omitempty"`
}

// BlockDevice holds the parameters of an EBS volume.
type BlockDevice struct {
	// DeleteOnTermination deletes the volume when the instance terminates.
	// +optional
	DeleteOnTermination *bool `json:"deleteOnTermination,omitempty"`

	// Encrypted encrypts the volume. It cannot be set for a volume created from a snapshot.
	// +optional
	Encrypted *bool `json:"encrypted,omitempty"`

	// IOPS is the provisioned I/O operations per second (gp3: 3,000-16,000; io1 and io2: 100-64,000).
	// Only gp3, io1 and io2 volumes accept it.
	// +optional
	IOPS *int64 `json:"iops,omitempty"`

	// KMSKeyID is the key ID, alias or ARN of the customer managed KMS key that encrypts the volume.
	// +optional
	KMSKeyID *string `json:"kmsKeyID,omitempty"`

	// SnapshotID is the EBS snapshot the volume is created from.
	// +optional
	SnapshotID *string `json:"snapshotID,omitempty"`

	// Throughput is the provisioned throughput of a gp3 volume in MiB/s (125-1,000).
	// +optional
	Throughput *int64 `json:"throughput,omitempty"`

	// VolumeInitializationRate is the rate, in MiB/s, at which snapshot blocks are downloaded to the
	// volume. It requires SnapshotID.
	//
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=300
	// +optional
	VolumeInitializationRate *int32 `json:"volumeInitializationRate,omitempty"`

	// VolumeSize is the volume size in Gi, G, Ti or T (at most 59000Gi, 64000G, 58Ti or 64T). One of
	// VolumeSize and SnapshotID is required.
	//
	// +kubebuilder:validation:Pattern="^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=string
	// +optional
	VolumeSize *resource.Quantity `json:"volumeSize,omitempty"`

	// VolumeType is the EBS volume type.
	//
	// +kubebuilder:validation:Enum={standard,io1,io2,gp2,sc1,st1,gp3}
	// +optional
	VolumeType *string `json:"volumeType,omitempty"`
}

// MetadataOptions set the exposure of the instance metadata service (IMDS) on nodes.
type MetadataOptions struct {
	// HTTPEndpoint enables or disables the metadata endpoint. Defaults to enabled.
	//
	// +kubebuilder:default=enabled
	// +kubebuilder:validation:Enum={enabled,disabled}
	// +optional
	HTTPEndpoint *string `json:"httpEndpoint,omitempty"`

	// HTTPProtocolIPv6 enables or disables the IPv6 metadata endpoint. Defaults to disabled.
	//
	// +kubebuilder:default=disabled
	// +kubebuilder:validation:Enum={enabled,disabled}
	// +optional
	HTTPProtocolIPv6 *string `json:"httpProtocolIPv6,omitempty"`

	// HTTPPutResponseHopLimit is the hop limit of metadata PUT responses (1-64). Defaults to 1, which
	// keeps the token out of reach of pods that do not use the host network.
	//
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	HTTPPutResponseHopLimit *int64 `json:"httpPutResponseHopLimit,omitempty"`

	// HTTPTokens makes session tokens (IMDSv2) required or optional. Defaults to required.
	//
	// +kubebuilder:default=required
	// +kubebuilder:validation:Enum={required,optional}
	// +optional
	HTTPTokens *string `json:"httpTokens,omitempty"`
}

// NetworkInterface places one network interface on a network card of the instance.
type NetworkInterface struct {
	// NetworkCardIndex is the index of the network card.
	//
	// +kubebuilder:validation:Minimum=0
	// +required
	NetworkCardIndex int32 `json:"networkCardIndex"`

	// DeviceIndex is the device index of the interface on its card; 0 on card 0 is the primary interface.
	//
	// +kubebuilder:validation:Minimum=0
	// +required
	DeviceIndex int32 `json:"deviceIndex"`

	// InterfaceType is "interface" (an ENA interface) or "efa-only" (an EFA device without IP addresses).
	//
	// +kubebuilder:validation:Enum={interface,efa-only}
	// +required
	InterfaceType NetworkInterfaceType `json:"interfaceType"`
}

// NetworkInterfaceType is the kind of a network interface in spec.networkInterfaces.
type NetworkInterfaceType string

const (
	// NetworkInterfaceTypeInterface is a regular ENA interface with IP addresses.
	NetworkInterfaceTypeInterface NetworkInterfaceType = "interface"
	// NetworkInterfaceTypeEFAOnly is an EFA device without IP addresses.
	NetworkInterfaceTypeEFAOnly NetworkInterfaceType = "efa-only"
)

// ConnectionTracking sets the connection-tracking idle timeouts, in seconds, of the primary interface.
type ConnectionTracking struct {
	// TCPEstablishedTimeout is the idle timeout of established TCP connections (60-432000).
	//
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=432000
	// +optional
	TCPEstablishedTimeout *int32 `json:"tcpEstablishedTimeout,omitempty"`

	// UDPStreamTimeout is the idle timeout of UDP flows seen in both directions more than once (60-180).
	//
	// +kubebuilder:validation:Minimum=60
	// +kubebuilder:validation:Maximum=180
	// +optional
	UDPStreamTimeout *int32 `json:"udpStreamTimeout,omitempty"`

	// UDPTimeout is the idle timeout of other UDP flows (30-60).
	//
	// +kubebuilder:validation:Minimum=30
	// +kubebuilder:validation:Maximum=60
	// +optional
	UDPTimeout *int32 `json:"udpTimeout,omitempty"`
}

// CPUOptions set CPU features of launched instances.
type CPUOptions struct {
	// NestedVirtualization enables or disables nested virtualization; instance types that do not support
	// it are left out when enabled.
	//
	// +kubebuilder:validation:Enum={enabled,disabled}
	// +optional
	NestedVirtualization *string `json:"nestedVirtualization,omitempty"`
}
