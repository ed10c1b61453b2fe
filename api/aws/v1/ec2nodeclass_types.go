package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClass describes how the AWS provider launches EC2 instances for the NodePools that reference it:
// subnets, security groups, AMIs, IAM identity, launch-template settings and kubelet configuration.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ec2nodeclasses,scope=Cluster,categories=karpenter,shortName={ec2nc,ec2ncs}
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status",description=""
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp",description=""
// +kubebuilder:printcolumn:name="Role",type="string",JSONPath=".spec.role",priority=1,description=""
type EC2NodeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired launch configuration.
	//
	// +kubebuilder:validation:XValidation:message="must specify exactly one of ['role', 'instanceProfile']",rule="has(self.role) != has(self.instanceProfile)"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias",rule="!has(self.amiFamily) || self.amiFamily in ['AL2', 'Custom'] || !has(self.amiSelectorTerms) || !self.amiSelectorTerms.exists(t, has(t.alias) && t.alias.find('^[^@]+') == 'al2')"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias",rule="!has(self.amiFamily) || self.amiFamily in ['AL2023', 'Custom'] || !has(self.amiSelectorTerms) || !self.amiSelectorTerms.exists(t, has(t.alias) && t.alias.find('^[^@]+') == 'al2023')"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias",rule="!has(self.amiFamily) || self.amiFamily in ['Bottlerocket', 'Custom'] || !has(self.amiSelectorTerms) || !self.amiSelectorTerms.exists(t, has(t.alias) && t.alias.find('^[^@]+') == 'bottlerocket')"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias",rule="!has(self.amiFamily) || self.amiFamily in ['Windows2019', 'Custom'] || !has(self.amiSelectorTerms) || !self.amiSelectorTerms.exists(t, has(t.alias) && t.alias.find('^[^@]+') == 'windows2019')"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias",rule="!has(self.amiFamily) || self.amiFamily in ['Windows2022', 'Custom'] || !has(self.amiSelectorTerms) || !self.amiSelectorTerms.exists(t, has(t.alias) && t.alias.find('^[^@]+') == 'windows2022')"
	// +kubebuilder:validation:XValidation:message="if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias",rule="!has(self.amiFamily) || self.amiFamily in ['Windows2025', 'Custom'] || !has(self.amiSelectorTerms) || !self.amiSelectorTerms.exists(t, has(t.alias) && t.alias.find('^[^@]+') == 'windows2025')"
	// +kubebuilder:validation:XValidation:message="must specify amiFamily if amiSelectorTerms does not contain an alias",rule="has(self.amiFamily) || (has(self.amiSelectorTerms) && self.amiSelectorTerms.exists(t, has(t.alias)))"
	// +required
	Spec EC2NodeClassSpec `json:"spec"`

	// Status is the resolved state: discovered subnets, security groups, AMIs, capacity reservations,
	// the instance profile in use, and readiness conditions.
	// +optional
	Status EC2NodeClassStatus `json:"status,omitempty"`
}

// EC2NodeClassList is a list of EC2NodeClass objects.
//
// +kubebuilder:object:root=true
type EC2NodeClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the EC2NodeClasses of the list.
	Items []EC2NodeClass `json:"items"`
}

// EC2NodeClassSpec is the launch configuration of an EC2NodeClass.
type EC2NodeClassSpec struct {
	// SubnetSelectorTerms select the subnets instances may be launched into. Terms are ORed; the fields of
	// one term are ANDed.
	//
	// +kubebuilder:validation:XValidation:message="subnetSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id']",rule="self.all(t, has(t.tags) || has(t.id))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term",rule="!self.all(t, has(t.id) && has(t.tags))"
	// +kubebuilder:validation:MaxItems=30
	// +required
	SubnetSelectorTerms []SubnetSelectorTerm `json:"subnetSelectorTerms"`

	// SecurityGroupSelectorTerms select the security groups attached to instances. Terms are ORed; the
	// fields of one term are ANDed.
	//
	// +kubebuilder:validation:XValidation:message="securityGroupSelectorTerms cannot be empty",rule="self.size() != 0"
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name']",rule="self.all(t, has(t.tags) || has(t.id) || has(t.name))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.all(t, has(t.id) && (has(t.tags) || has(t.name)))"
	// +kubebuilder:validation:XValidation:message="'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term",rule="!self.all(t, has(t.name) && (has(t.tags) || has(t.id)))"
	// +kubebuilder:validation:MaxItems=30
	// +required
	SecurityGroupSelectorTerms []SecurityGroupSelectorTerm `json:"securityGroupSelectorTerms"`

	// CapacityReservationSelectorTerms select the on-demand capacity reservations and capacity blocks
	// instances may be launched into. Terms are ORed.
	//
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']",rule="self.all(t, has(t.tags) || has(t.id) || has(t.instanceMatchCriteria))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term",rule="!self.all(t, has(t.id) && (has(t.tags) || has(t.ownerID) || has(t.instanceMatchCriteria)))"
	// +kubebuilder:validation:MaxItems=30
	// +optional
	CapacityReservationSelectorTerms []CapacityReservationSelectorTerm `json:"capacityReservationSelectorTerms,omitempty"`

	// PlacementGroupSelector selects the cluster, partition or spread placement group instances are
	// launched into.
	//
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['name', 'id']",rule="has(self.name) || has(self.id)"
	// +kubebuilder:validation:XValidation:message="'name' and 'id' are mutually exclusive",rule="!(has(self.name) && has(self.id))"
	// +optional
	PlacementGroupSelector *PlacementGroupSelector `json:"placementGroupSelector,omitempty"`

	// AssociatePublicIPAddress controls whether instances get a public IPv4 address.
	// +optional
	AssociatePublicIPAddress *bool `json:"associatePublicIPAddress,omitempty"`

	// IPPrefixCount is the number of IPv4 prefixes assigned to the primary network interface.
	// +kubebuilder:validation:Minimum=0
	// +optional
	IPPrefixCount *int32 `json:"ipPrefixCount,omitempty"`

	// AMISelectorTerms select the AMIs instances boot from. Terms are ORed; the fields of one term are
	// ANDed. An alias term must be the only term.
	//
	// +kubebuilder:validation:XValidation:message="expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']",rule="self.all(t, has(t.tags) || has(t.id) || has(t.name) || has(t.alias) || has(t.ssmParameter))"
	// +kubebuilder:validation:XValidation:message="'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="self.all(t, !has(t.id) || !(has(t.alias) || has(t.tags) || has(t.name) || has(t.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms",rule="self.all(t, !has(t.alias) || !(has(t.id) || has(t.tags) || has(t.name) || has(t.owner)))"
	// +kubebuilder:validation:XValidation:message="'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms",rule="self.size() == 1 || !self.exists(t, has(t.alias))"
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=30
	// +required
	AMISelectorTerms []AMISelectorTerm `json:"amiSelectorTerms"`

	// AMIFamily selects the user-data format and default block devices. It is optional with an alias term
	// (the family is taken from the alias, and may then only be that family or Custom) and required
	// without one.
	//
	// +kubebuilder:validation:Enum={AL2,AL2023,Bottlerocket,Custom,Windows2019,Windows2022,Windows2025}
	// +optional
	AMIFamily *string `json:"amiFamily,omitempty"`

	// UserData is merged with the bootstrap configuration the provider generates for the AMI family.
	// +optional
	UserData *string `json:"userData,omitempty"`

	// Role is the IAM role nodes use; the provider creates and owns an instance profile for it.
	// Exactly one of role and instanceProfile must be set.
	//
	// +kubebuilder:validation:XValidation:message="role cannot be empty",rule="self != ''"
	// +optional
	Role string `json:"role,omitempty"`

	// InstanceProfile is an existing IAM instance profile nodes use. Exactly one of role and
	// instanceProfile must be set.
	//
	// +kubebuilder:validation:XValidation:message="instanceProfile cannot be empty",rule="self != ''"
	// +optional
	InstanceProfile *string `json:"instanceProfile,omitempty"`

	// Tags are applied to the instances, volumes, fleets, launch templates and instance profiles the
	// provider creates. Keys the provider sets itself are rejected.
	//
	// +kubebuilder:validation:XValidation:message="empty tag keys aren't supported",rule="self.all(k, k != '')"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching eks:eks-cluster-name",rule="!('eks:eks-cluster-name' in self)"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching kubernetes.io/cluster/",rule="self.all(k, !k.startsWith('kubernetes.io/cluster'))"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodepool",rule="!('karpenter.sh/nodepool' in self)"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.sh/nodeclaim",rule="!('karpenter.sh/nodeclaim' in self)"
	// +kubebuilder:validation:XValidation:message="tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass",rule="!('karpenter.k8s.aws/ec2nodeclass' in self)"
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// Kubelet configures the kubelet of provisioned nodes (a subset of the upstream KubeletConfiguration).
	//
	// +kubebuilder:validation:XValidation:message="imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent",rule="!has(self.imageGCHighThresholdPercent) || !has(self.imageGCLowThresholdPercent) || self.imageGCHighThresholdPercent > self.imageGCLowThresholdPercent"
	// +kubebuilder:validation:XValidation:message="evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod",rule="!has(self.evictionSoft) || self.evictionSoft.all(k, has(self.evictionSoftGracePeriod) && k in self.evictionSoftGracePeriod)"
	// +kubebuilder:validation:XValidation:message="evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft",rule="!has(self.evictionSoftGracePeriod) || self.evictionSoftGracePeriod.all(k, has(self.evictionSoft) && k in self.evictionSoft)"
	// +optional
	Kubelet *KubeletConfiguration `json:"kubelet,omitempty"`

	// BlockDeviceMappings are the block devices attached to instances. At most one may be the root volume.
	//
	// +kubebuilder:validation:XValidation:message="must have only one blockDeviceMappings with rootVolume",rule="self.filter(b, has(b.rootVolume) && b.rootVolume).size() <= 1"
	// +kubebuilder:validation:MaxItems=50
	// +optional
	BlockDeviceMappings []BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`

	// InstanceStorePolicy sets how instance-store disks are used.
	// +optional
	InstanceStorePolicy *InstanceStorePolicy `json:"instanceStorePolicy,omitempty"`

	// NetworkInterfaces lays out the network interfaces of an instance across network cards (for EFA).
	// When set, it must include the primary interface (card 0, device 0, type interface).
	//
	// +kubebuilder:validation:XValidation:message="networkInterfaces must include a primary interface with interfaceType='interface'",rule="self.size() == 0 || self.exists(n, n.networkCardIndex == 0 && n.deviceIndex == 0 && n.interfaceType == 'interface')"
	// +kubebuilder:validation:XValidation:message="networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card",rule="self.all(a, self.exists_one(b, b.networkCardIndex == a.networkCardIndex && b.deviceIndex == a.deviceIndex)) && self.all(a, a.interfaceType != 'efa-only' || self.exists_one(b, b.networkCardIndex == a.networkCardIndex && b.interfaceType == 'efa-only'))"
	// +kubebuilder:validation:MaxItems=150
	// +optional
	NetworkInterfaces []NetworkInterface `json:"networkInterfaces,omitempty"`

	// DetailedMonitoring enables detailed CloudWatch monitoring of instances.
	// +optional
	DetailedMonitoring *bool `json:"detailedMonitoring,omitempty"`

	// MetadataOptions set the exposure of the instance metadata service (IMDS) to nodes. When omitted it
	// defaults to an enabled endpoint without IPv6, a PUT response hop limit of 1 and required tokens.
	//
	// +kubebuilder:default={"httpEndpoint":"enabled","httpProtocolIPv6":"disabled","httpPutResponseHopLimit":1,"httpTokens":"required"}
	// +optional
	MetadataOptions *MetadataOptions `json:"metadataOptions,omitempty"`

	// ConnectionTracking sets the connection-tracking idle timeouts of the primary network interface.
	//
	// +kubebuilder:validation:XValidation:message="at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set",rule="has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)"
	// +optional
	ConnectionTracking *ConnectionTracking `json:"connectionTracking,omitempty"`

	// Context is the reserved EC2 CreateFleet Context field.
	// +optional
	Context *string `json:"context,omitempty"`

	// CPUOptions set CPU features of the launched instances.
	// +optional
	CPUOptions *CPUOptions `json:"cpuOptions,omitempty"`
}

// AMI families accepted by spec.amiFamily.
const (
	// AMIFamilyAL2 is Amazon Linux 2.
	AMIFamilyAL2 = "AL2"
	// AMIFamilyAL2023 is Amazon Linux 2023.
	AMIFamilyAL2023 = "AL2023"
	// AMIFamilyBottlerocket is Bottlerocket.
	AMIFamilyBottlerocket = "Bottlerocket"
	// AMIFamilyCustom means user data is passed through unchanged and no default block devices are set.
	AMIFamilyCustom = "Custom"
	// AMIFamilyWindows2019 is Windows Server 2019.
	AMIFamilyWindows2019 = "Windows2019"
	// AMIFamilyWindows2022 is Windows Server 2022.
	AMIFamilyWindows2022 = "Windows2022"
	// AMIFamilyWindows2025 is Windows Server 2025.
	AMIFamilyWindows2025 = "Windows2025"
)

// InstanceStorePolicy sets how instance-store NVMe disks are used.
//
// +kubebuilder:validation:Enum={RAID0}
type InstanceStorePolicy string

// InstanceStorePolicyRAID0 builds one RAID-0 array from all instance-store NVMe disks and puts the
// containerd and kubelet state on it, so it counts as the node's ephemeral storage.
const InstanceStorePolicyRAID0 InstanceStorePolicy = "RAID0"
