package v1

// SubnetSelectorTerm selects subnets by tags or by ID. Its fields are ANDed.
type SubnetSelectorTerm struct {
	// Tags select subnets carrying all these tags. A value of "*" matches any value of that key.
	//
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// ID is a subnet ID.
	//
	// +kubebuilder:validation:Pattern="subnet-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`
}

// SecurityGroupSelectorTerm selects security groups by tags, ID or group name. Its fields are ANDed.
type SecurityGroupSelectorTerm struct {
	// Tags select security groups carrying all these tags. A value of "*" matches any value of that key.
	//
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// ID is a security group ID.
	//
	// +kubebuilder:validation:Pattern="sg-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`

	// Name is the security group's group name (not its Name tag).
	// +optional
	Name string `json:"name,omitempty"`
}

// CapacityReservationSelectorTerm selects capacity reservations by tags, ID, owner or match criteria.
// Its fields are ANDed.
type CapacityReservationSelectorTerm struct {
	// Tags select capacity reservations carrying all these tags. A value of "*" matches any value of
	// that key.
	//
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// ID is a capacity reservation ID.
	//
	// +kubebuilder:validation:Pattern="^cr-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`

	// OwnerID is the 12-digit ID of the AWS account that owns the reservation.
	//
	// +kubebuilder:validation:Pattern="^[0-9]{12}$"
	// +optional
	OwnerID string `json:"ownerID,omitempty"`

	// InstanceMatchCriteria selects reservations that accept any matching launch (open) or only
	// launches that target them (targeted).
	//
	// +kubebuilder:validation:Enum={open,targeted}
	// +optional
	InstanceMatchCriteria string `json:"instanceMatchCriteria,omitempty"`
}

// PlacementGroupSelector selects one placement group by name or by ID.
type PlacementGroupSelector struct {
	// Name is the placement group name.
	//
	// +kubebuilder:validation:MinLength=1
	// +optional
	Name string `json:"name,omitempty"`

	// ID is the placement group ID.
	//
	// +kubebuilder:validation:Pattern="^pg-[0-9a-z]+$"
	// +optional
	ID string `json:"id,omitempty"`
}

// AMISelectorTerm selects AMIs by alias, tags, ID, name/owner or SSM parameter. Its fields are ANDed.
type AMISelectorTerm struct {
	// Alias selects an EKS-optimized AMI as "family@version". Families are al2, al2023, bottlerocket,
	// windows2019, windows2022 and windows2025. The version is a release version (for example
	// "al2023@v20240625") or "latest"; Windows families accept only "latest".
	//
	// +kubebuilder:validation:XValidation:message="'alias' is improperly formatted, must match the format 'family@version'",rule="self.matches('^[a-zA-Z0-9]+@.+$')"
	// +kubebuilder:validation:XValidation:message="family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'",rule="self.find('^[^@]+') in ['al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025']"
	// +kubebuilder:validation:XValidation:message="windows families may only specify version 'latest'",rule="!(self.find('^[^@]+') in ['windows2019', 'windows2022', 'windows2025']) || self.find('@.*$') == '@latest'"
	// +kubebuilder:validation:MaxLength=30
	// +optional
	Alias string `json:"alias,omitempty"`

	// Tags select AMIs carrying all these tags. A value of "*" matches any value of that key.
	//
	// +kubebuilder:validation:XValidation:message="empty tag keys or values aren't supported",rule="self.all(k, k != '' && self[k] != '')"
	// +kubebuilder:validation:MaxProperties=20
	// +optional
	Tags map[string]string `json:"tags,omitempty"`

	// ID is an AMI ID.
	//
	// +kubebuilder:validation:Pattern="ami-[0-9a-z]+"
	// +optional
	ID string `json:"id,omitempty"`

	// Name is the AMI name (not its Name tag); wildcards are allowed.
	// +optional
	Name string `json:"name,omitempty"`

	// Owner is an AWS account ID, "self", "amazon" or "aws-marketplace".
	// +optional
	Owner string `json:"owner,omitempty"`

	// SSMParameter is the name or ARN of an SSM parameter whose value is an AMI ID.
	// +optional
	SSMParameter string `json:"ssmParameter,omitempty"`
}
