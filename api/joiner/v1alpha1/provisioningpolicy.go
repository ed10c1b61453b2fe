package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EnforcementAction says what a policy violation does at admission.
// +kubebuilder:validation:Enum=Deny;Warn;DryRun
type EnforcementAction string

const (
	// EnforcementDeny rejects the request.
	EnforcementDeny EnforcementAction = "Deny"
	// EnforcementWarn admits the request and returns a warning to the client.
	EnforcementWarn EnforcementAction = "Warn"
	// EnforcementDryRun admits the request and only records the violation (audit, metrics, events).
	EnforcementDryRun EnforcementAction = "DryRun"
)

// PolicyMatch selects the requests a policy is evaluated for.
type PolicyMatch struct {
	// Kinds are the kinds the policy applies to. With workloadTemplates, a Pod policy also applies to
	// the pod templates of workloads.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:Enum=NodePool;NodeClaim;EC2NodeClass;LocalNodeClass;Pod
	// +listType=set
	Kinds []string `json:"kinds"`
	// Operations are the admission operations the policy applies to; empty means CREATE and UPDATE.
	// +kubebuilder:validation:items:Enum=CREATE;UPDATE;DELETE
	// +listType=set
	// +optional
	Operations []string `json:"operations,omitempty"`
	// NamespaceSelector limits a Pod policy to namespaces whose labels match. It is ignored for
	// cluster-scoped kinds.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// WorkloadTemplates makes a Pod policy also judge the pod templates of Deployments, StatefulSets,
	// DaemonSets, ReplicaSets and Jobs (spec.template) and CronJobs (spec.jobTemplate.spec.template) at
	// admission, so a workload that breaks it is rejected before its Pods exist. The template is shown
	// to the policy as a Pod (input.review.kind.kind is Pod) and the field of each violation is prefixed
	// with the template's path, e.g. spec.template.spec.nodeSelector. Requires Pod in kinds. The
	// Pod-level check stays either way.
	// +kubebuilder:default=false
	// +optional
	WorkloadTemplates bool `json:"workloadTemplates,omitempty"`
}

// ProvisioningPolicySpec is a Rego policy and where it applies.
type ProvisioningPolicySpec struct {
	// Rego is the policy source in Rego v1 syntax. It must define a set rule `violation` whose
	// elements are objects with `msg` and optionally `field` and `details`, for example
	// `violation contains {"msg": "...", "field": "spec.limits.cpu"} if { ... }`.
	// Input: input.review.{object, oldObject, operation, userInfo, kind, namespace, name} and
	// input.parameters; data.inventory holds the cluster's NodePools and node classes.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=262144
	Rego string `json:"rego"`
	// EnforcementAction is Deny (reject), Warn (admit with a warning) or DryRun (only record).
	// +kubebuilder:default=Deny
	// +optional
	EnforcementAction EnforcementAction `json:"enforcementAction,omitempty"`
	// Match selects the requests the policy is evaluated for.
	Match PolicyMatch `json:"match"`
	// Parameters are passed to the policy as input.parameters.
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Type=object
	// +optional
	Parameters *apiextensionsv1.JSON `json:"parameters,omitempty"`
}

// AuditViolation is one violation found by the audit of existing objects.
type AuditViolation struct {
	// Kind of the violating object.
	Kind string `json:"kind"`
	// Name of the violating object.
	Name string `json:"name"`
	// Namespace of the violating object, if namespaced.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// Message of the violation.
	Message string `json:"message"`
	// Field is the path of the offending field, if the policy names one.
	// +optional
	Field string `json:"field,omitempty"`
}

// ProvisioningPolicyStatus is the observed state of a policy.
type ProvisioningPolicyStatus struct {
	// CompiledGeneration is the generation of the spec that is compiled and enforced.
	// +optional
	CompiledGeneration int64 `json:"compiledGeneration,omitempty"`
	// CompileError is the compile error of the current generation, if any.
	// +optional
	CompileError string `json:"compileError,omitempty"`
	// AuditTimestamp is when the audit last evaluated existing objects against this policy.
	// +optional
	AuditTimestamp *metav1.Time `json:"auditTimestamp,omitempty"`
	// TotalViolations is the number of violations the last audit found.
	// +optional
	TotalViolations int32 `json:"totalViolations,omitempty"`
	// Violations lists up to 20 of the violations the last audit found.
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Violations []AuditViolation `json:"violations,omitempty"`
	// Conditions: Ready is True when the current generation is compiled and enforced.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ProvisioningPolicy is a Rego policy that Joiner's admission webhooks, its audit controller and
// the offline `joiner policy check` command all evaluate with the same engine.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=provisioningpolicies,scope=Cluster,categories={joiner},shortName={pp,pps}
// +kubebuilder:printcolumn:name="Action",type="string",JSONPath=".spec.enforcementAction"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Violations",type="integer",JSONPath=".status.totalViolations"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ProvisioningPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ProvisioningPolicySpec   `json:"spec"`
	Status ProvisioningPolicyStatus `json:"status,omitempty"`
}

// ProvisioningPolicyList is a list of ProvisioningPolicy.
//
// +kubebuilder:object:root=true
type ProvisioningPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProvisioningPolicy `json:"items"`
}

// ConditionReady is the root condition of Joiner's own kinds.
const ConditionReady = "Ready"
