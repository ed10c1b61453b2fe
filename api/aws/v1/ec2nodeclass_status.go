package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClassStatus is the state the provider resolved for an EC2NodeClass.
type EC2NodeClassStatus struct {
	// Subnets are the subnets that match subnetSelectorTerms.
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`

	// SecurityGroups are the security groups that match securityGroupSelectorTerms.
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`

	// CapacityReservations are the capacity reservations that match capacityReservationSelectorTerms.
	// +optional
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`

	// AMIs are the AMIs that match amiSelectorTerms, each with the instance-type requirements it serves.
	// +optional
	AMIs []AMI `json:"amis,omitempty"`

	// InstanceProfile is the name of the instance profile nodes are launched with.
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`

	// Conditions report whether each dependency is resolved; Ready is their conjunction.
	//
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is a resolved subnet.
type Subnet struct {
	// ID is the subnet ID.
	// +required
	ID string `json:"id"`

	// Zone is the name of the subnet's availability zone.
	// +required
	Zone string `json:"zone"`

	// ZoneID is the ID of the subnet's availability zone.
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is a resolved security group.
type SecurityGroup struct {
	// ID is the security group ID.
	// +required
	ID string `json:"id"`

	// Name is the security group's group name.
	// +optional
	Name string `json:"name,omitempty"`
}

// AMI is a resolved AMI.
type AMI struct {
	// ID is the AMI ID.
	// +required
	ID string `json:"id"`

	// Name is the AMI name.
	// +optional
	Name string `json:"name,omitempty"`

	// Deprecated tells whether the AMI is deprecated.
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`

	// Requirements select the instance types this AMI serves (architecture, accelerators, ...).
	// +required
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`
}

// CapacityReservation is a resolved capacity reservation.
type CapacityReservation struct {
	// AvailabilityZone is the zone the reservation is in.
	// +required
	AvailabilityZone string `json:"availabilityZone"`

	// EndTime is when the reservation expires and its capacity is released.
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`

	// ID is the capacity reservation ID.
	//
	// +kubebuilder:validation:Pattern="^cr-[0-9a-z]+$"
	// +required
	ID string `json:"id"`

	// InstanceMatchCriteria is the kind of launches the reservation accepts.
	//
	// +kubebuilder:validation:Enum={open,targeted}
	// +required
	InstanceMatchCriteria string `json:"instanceMatchCriteria"`

	// InstanceType is the instance type of the reservation.
	// +required
	InstanceType string `json:"instanceType"`

	// OwnerID is the ID of the AWS account that owns the reservation.
	//
	// +kubebuilder:validation:Pattern="^[0-9]{12}$"
	// +required
	OwnerID string `json:"ownerID"`

	// ReservationType is "default" for an on-demand capacity reservation or "capacity-block".
	//
	// +kubebuilder:validation:Enum={default,capacity-block}
	// +optional
	ReservationType CapacityReservationType `json:"reservationType,omitempty"`

	// Interruptible tells whether the reservation's capacity can be reclaimed.
	// +optional
	Interruptible bool `json:"interruptible,omitempty"`

	// State is "active", or "expiring" for a capacity block close to its end time.
	//
	// +kubebuilder:validation:Enum={active,expiring}
	// +optional
	State CapacityReservationState `json:"state,omitempty"`
}

// CapacityReservationType is the kind of a capacity reservation.
type CapacityReservationType string

const (
	// CapacityReservationTypeDefault is an on-demand capacity reservation (ODCR).
	CapacityReservationTypeDefault CapacityReservationType = "default"
	// CapacityReservationTypeCapacityBlock is an EC2 capacity block.
	CapacityReservationTypeCapacityBlock CapacityReservationType = "capacity-block"
)

// CapacityReservationState is the state of a resolved capacity reservation.
type CapacityReservationState string

const (
	// CapacityReservationStateActive is a usable reservation.
	CapacityReservationStateActive CapacityReservationState = "active"
	// CapacityReservationStateExpiring is a capacity block within its reclaim window before the end time.
	CapacityReservationStateExpiring CapacityReservationState = "expiring"
)

// Condition types of an EC2NodeClass.
const (
	// ConditionTypeReady is true when every dependency condition below is true.
	ConditionTypeReady = "Ready"
	// ConditionTypeAMIsReady is true when amiSelectorTerms resolved to at least one AMI.
	ConditionTypeAMIsReady = "AMIsReady"
	// ConditionTypeSubnetsReady is true when subnetSelectorTerms resolved to at least one subnet.
	ConditionTypeSubnetsReady = "SubnetsReady"
	// ConditionTypeSecurityGroupsReady is true when securityGroupSelectorTerms resolved to at least one group.
	ConditionTypeSecurityGroupsReady = "SecurityGroupsReady"
	// ConditionTypeInstanceProfileReady is true when the instance profile exists (and holds the role).
	ConditionTypeInstanceProfileReady = "InstanceProfileReady"
	// ConditionTypeCapacityReservationsReady is true when capacity reservations resolved; only used when
	// the reserved-capacity feature is on.
	ConditionTypeCapacityReservationsReady = "CapacityReservationsReady"
	// ConditionTypePlacementGroupReady is true when the placement group selector resolved, or none is set.
	ConditionTypePlacementGroupReady = "PlacementGroupReady"
	// ConditionTypeValidationSucceeded is true when dry-run launch authorization and configuration checks pass.
	ConditionTypeValidationSucceeded = "ValidationSucceeded"
)

// Reasons of EC2NodeClass conditions that are not true.
const (
	// ReasonAMINotFound means no AMI matched amiSelectorTerms.
	ReasonAMINotFound = "AMINotFound"
	// ReasonUnsupportedAlias means the alias names a family or version that cannot be resolved.
	ReasonUnsupportedAlias = "UnsupportedAlias"
	// ReasonSubnetsNotFound means no subnet matched subnetSelectorTerms.
	ReasonSubnetsNotFound = "SubnetsNotFound"
	// ReasonSecurityGroupsNotFound means no security group matched securityGroupSelectorTerms.
	ReasonSecurityGroupsNotFound = "SecurityGroupsNotFound"
	// ReasonPlacementGroupNotFound means no placement group matched the selector.
	ReasonPlacementGroupNotFound = "PlacementGroupNotFound"
	// ReasonPlacementGroupResolutionFailed means looking up the placement group failed.
	ReasonPlacementGroupResolutionFailed = "PlacementGroupResolutionFailed"
	// ReasonCreateFleetAuthCheckFailed means the dry-run CreateFleet was not authorized.
	ReasonCreateFleetAuthCheckFailed = "CreateFleetAuthCheckFailed"
	// ReasonCreateLaunchTemplateAuthCheckFailed means the dry-run CreateLaunchTemplate was not authorized.
	ReasonCreateLaunchTemplateAuthCheckFailed = "CreateLaunchTemplateAuthCheckFailed"
	// ReasonRunInstancesAuthCheckFailed means the dry-run RunInstances was not authorized.
	ReasonRunInstancesAuthCheckFailed = "RunInstancesAuthCheckFailed"
	// ReasonInstanceProfileNotFound means the instance profile does not exist.
	ReasonInstanceProfileNotFound = "InstanceProfileNotFound"
	// ReasonDependenciesNotReady means validation waits for the other conditions (status Unknown).
	ReasonDependenciesNotReady = "DependenciesNotReady"
	// ReasonTagValidationFailed means spec.tags holds a restricted tag key.
	ReasonTagValidationFailed = "TagValidationFailed"
	// ReasonInvalidKubeletConfiguration means spec.kubelet is not valid for the AMI family.
	ReasonInvalidKubeletConfiguration = "InvalidKubeletConfiguration"
	// ReasonUnsupportedKubeletConfiguration means spec.kubelet sets options the AMI family cannot apply.
	ReasonUnsupportedKubeletConfiguration = "UnsupportedKubeletConfiguration"
	// ReasonDryRunDisabled means dry-run validation is turned off and was skipped.
	ReasonDryRunDisabled = "DryRunDisabled"
	// ReasonUserDataSizeLimitExceeded means the merged user data is larger than EC2 accepts.
	ReasonUserDataSizeLimitExceeded = "UserDataSizeLimitExceeded"
)
