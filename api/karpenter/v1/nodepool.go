package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodePoolSpec is the desired state of a NodePool: the template of the NodeClaims it launches, how
// they may be disrupted, and limits, weight or a fixed replica count.
//
// +kubebuilder:validation:XValidation:rule="has(self.replicas) == has(oldSelf.replicas)",message="Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",message="only 'limits.nodes' is supported on static NodePools"
// +kubebuilder:validation:XValidation:rule="!has(self.replicas) || !has(self.weight)",message="'weight' is not supported on static NodePools"
type NodePoolSpec struct {
	// Template is the template of the NodeClaims this NodePool launches. A launched NodeClaim is
	// usually narrower than the template (one instance type, one zone).
	// +required
	Template NodeClaimTemplate `json:"template"`

	// Disruption controls consolidation and disruption budgets. When omitted it defaults to
	// {consolidateAfter: 0s}, which in turn defaults the policy and the budgets.
	// +kubebuilder:default:={consolidateAfter: "0s"}
	// +optional
	Disruption Disruption `json:"disruption,omitzero"`

	// Limits caps the total resources of the NodePool's nodes; provisioning stops once they are
	// exceeded. The key "nodes" caps the node count. Static NodePools accept only "nodes".
	// +optional
	Limits corev1.ResourceList `json:"limits,omitempty"`

	// Weight orders NodePools: a higher weight is tried first; unset counts as 0. Not allowed on
	// static NodePools.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	Weight *int32 `json:"weight,omitempty"`

	// Replicas makes the NodePool static: it keeps exactly this many nodes regardless of pending
	// pods, and ignores the consolidation policy and consolidateAfter (alpha in Karpenter). A
	// NodePool cannot switch between static and dynamic after creation.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Replicas *int64 `json:"replicas,omitempty"`
}

// IsStatic reports whether the NodePool keeps a fixed number of nodes (spec.replicas is set).
func (in *NodePool) IsStatic() bool {
	return in.Spec.Replicas != nil
}

// ConsolidationPolicy says which nodes consolidation may remove or replace.
// +kubebuilder:validation:Enum=WhenEmpty;WhenEmptyOrUnderutilized;Balanced
type ConsolidationPolicy string

// Consolidation policies.
const (
	// ConsolidationPolicyWhenEmpty consolidates only nodes without workload pods.
	ConsolidationPolicyWhenEmpty ConsolidationPolicy = "WhenEmpty"
	// ConsolidationPolicyWhenEmptyOrUnderutilized also deletes or replaces underutilized nodes.
	ConsolidationPolicyWhenEmptyOrUnderutilized ConsolidationPolicy = "WhenEmptyOrUnderutilized"
	// ConsolidationPolicyBalanced weighs savings against disruption and only approves moves whose
	// score reaches 1/BalancedK (Karpenter v1.14).
	ConsolidationPolicyBalanced ConsolidationPolicy = "Balanced"
)

// BalancedK is the scoring parameter of the Balanced policy: a move is approved when its score is
// at least 1/BalancedK.
const BalancedK = 2

// Disruption holds the consolidation policy, its delay and the disruption budgets of a NodePool.
type Disruption struct {
	// ConsolidateAfter is how long a node must have seen no pod scheduled or removed before
	// consolidation considers it; "Never" disables consolidation, emptiness included. Required
	// whenever disruption is given (Karpenter v1.0-v1.14).
	// +required
	ConsolidateAfter NillableDuration `json:"consolidateAfter,omitzero"`

	// ConsolidationPolicy is WhenEmpty, WhenEmptyOrUnderutilized (the default) or Balanced.
	// +kubebuilder:default:="WhenEmptyOrUnderutilized"
	// +optional
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`

	// Budgets limit how many nodes may be disrupted at once; when several are active the most
	// restrictive wins. Defaults to one budget of 10%.
	// +kubebuilder:validation:XValidation:rule="self.all(x, has(x.schedule) == has(x.duration))",message="'schedule' must be set with 'duration'"
	// +kubebuilder:default:={{nodes: "10%"}}
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	// +optional
	Budgets []Budget `json:"budgets,omitempty"`
}

// DisruptionReason names a voluntary disruption method a budget can be restricted to.
// +kubebuilder:validation:Enum=Underutilized;Empty;Drifted
type DisruptionReason string

// Disruption reasons.
const (
	// DisruptionReasonUnderutilized is consolidation of underutilized nodes.
	DisruptionReasonUnderutilized DisruptionReason = "Underutilized"
	// DisruptionReasonEmpty is consolidation of empty nodes.
	DisruptionReasonEmpty DisruptionReason = "Empty"
	// DisruptionReasonDrifted is replacement of drifted nodes.
	DisruptionReasonDrifted DisruptionReason = "Drifted"
)

// Budget limits how many of a NodePool's nodes may be disrupted at the same time, optionally only
// during a recurring window and only for some reasons.
type Budget struct {
	// Reasons restricts the budget to these disruption methods; unset means all of them.
	// +kubebuilder:validation:MaxItems=50
	// +listType=set
	// +optional
	Reasons []DisruptionReason `json:"reasons,omitempty"`

	// Nodes is the most nodes that may be disrupting at once: a count ("5") or a percentage of the
	// NodePool's nodes ("10%", rounded up). Defaults to "10%".
	// +kubebuilder:validation:Pattern=`^((100|[0-9]{1,2})%|[0-9]+)$`
	// +kubebuilder:default:="10%"
	// +optional
	Nodes string `json:"nodes,omitempty"`

	// Schedule is a cron expression (or @daily and similar), evaluated in UTC, at which the budget
	// becomes active for Duration. Must be set together with Duration; unset means always active.
	// +kubebuilder:validation:Pattern=`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`
	// +optional
	Schedule *string `json:"schedule,omitempty"`

	// Duration is how long the budget stays active after each Schedule hit, in hours and minutes
	// ("8h", "1h30m"). Must be set together with Schedule.
	// +kubebuilder:validation:Pattern=`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`
	// +kubebuilder:validation:Type=string
	// +optional
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// NodeClaimTemplate is the template of the NodeClaims a NodePool launches.
type NodeClaimTemplate struct {
	// TemplateObjectMeta holds the labels and annotations copied to each NodeClaim and its Node.
	// +optional
	TemplateObjectMeta `json:"metadata,omitzero"`

	// Spec is the NodeClaim spec of the template.
	// +required
	Spec NodeClaimTemplateSpec `json:"spec"`
}

// labelValue is the schema of one label value in a NodePool template: at most 63 characters of
// label-value syntax. It is an alias of string, so the labels stay a map[string]string in Go.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type labelValue = string

// TemplateObjectMeta is the metadata of a NodeClaim template.
//
// Its deep-copy methods are written by hand (templatemeta_deepcopy.go): the object generator
// cannot copy a map whose value type is an alias.
// +kubebuilder:object:generate=false
type TemplateObjectMeta struct {
	// Labels are added to each NodeClaim and Node. The karpenter.sh domain (except
	// karpenter.sh/capacity-type), karpenter.sh/nodepool and kubernetes.io/hostname are reserved,
	// and so is the karpenter.k8s.aws domain except the AWS provider's well-known labels (the
	// rule its CRDs add).
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:rule=`self.all(x, x in ["karpenter.sh/capacity-type", "karpenter.sh/nodepool"] || !x.find("^([^/]+)").endsWith("karpenter.sh"))`,message=`label domain "karpenter.sh" is restricted`
	// +kubebuilder:validation:XValidation:rule=`self.all(x, x != "karpenter.sh/nodepool")`,message=`label "karpenter.sh/nodepool" is restricted`
	// +kubebuilder:validation:XValidation:rule=`self.all(x, x != "kubernetes.io/hostname")`,message=`label "kubernetes.io/hostname" is restricted`
	// +kubebuilder:validation:XValidation:rule=`self.all(x, x in ["karpenter.k8s.aws/instance-tenancy", "karpenter.k8s.aws/capacity-reservation-type", "karpenter.k8s.aws/capacity-reservation-id", "karpenter.k8s.aws/ec2nodeclass", "karpenter.k8s.aws/instance-encryption-in-transit-supported", "karpenter.k8s.aws/instance-category", "karpenter.k8s.aws/instance-hypervisor", "karpenter.k8s.aws/instance-family", "karpenter.k8s.aws/instance-generation", "karpenter.k8s.aws/instance-local-nvme", "karpenter.k8s.aws/instance-size", "karpenter.k8s.aws/instance-cpu", "karpenter.k8s.aws/instance-cpu-manufacturer", "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz", "karpenter.k8s.aws/instance-memory", "karpenter.k8s.aws/instance-ebs-bandwidth", "karpenter.k8s.aws/instance-network-bandwidth", "karpenter.k8s.aws/instance-gpu-name", "karpenter.k8s.aws/instance-gpu-manufacturer", "karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-gpu-memory", "karpenter.k8s.aws/instance-accelerator-name", "karpenter.k8s.aws/instance-accelerator-manufacturer", "karpenter.k8s.aws/instance-accelerator-count", "karpenter.k8s.aws/instance-capability-flex"] || !x.find("^([^/]+)").endsWith("karpenter.k8s.aws"))`,message=`label domain "karpenter.k8s.aws" is restricted`
	// +mapType=atomic
	// +optional
	Labels map[string]labelValue `json:"labels,omitempty"`

	// Annotations are added to each NodeClaim and Node.
	// +mapType=granular
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// NodeClaimTemplateSpec is the NodeClaim spec of a NodePool template: a NodeClaimSpec without
// resource requests, which only the scheduler sets.
type NodeClaimTemplateSpec struct {
	// Taints are applied to the nodes and must be tolerated by the pods that run on them.
	// +listType=atomic
	// +optional
	Taints []Taint `json:"taints,omitempty"`

	// StartupTaints are applied to nodes at startup and are expected to be removed by someone else
	// (typically a DaemonSet) before the node is initialized. Pods need not tolerate them.
	// +listType=atomic
	// +optional
	StartupTaints []Taint `json:"startupTaints,omitempty"`

	// Requirements constrain the instance types, zones, capacity types and other labels of the
	// nodes. The key karpenter.sh/nodepool is reserved here.
	// +kubebuilder:validation:XValidation:rule="self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",message="requirements with operator 'In' must have a value defined"
	// +kubebuilder:validation:XValidation:rule="self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",message="requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"
	// +kubebuilder:validation:XValidation:rule="self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",message="requirements with 'minValues' must have at least that many values specified in the 'values' field"
	// +kubebuilder:validation:items:XValidation:rule=`self.key != "karpenter.sh/nodepool"`,message=`label "karpenter.sh/nodepool" is restricted`,fieldPath=".key"
	// +kubebuilder:validation:MaxItems=100
	// +listType=atomic
	// +required
	Requirements []NodeSelectorRequirementWithMinValues `json:"requirements"`

	// NodeClassRef points to the provider-specific node class (for AWS an EC2NodeClass). Its group
	// and kind cannot change; its name can.
	// +kubebuilder:validation:XValidation:rule="self.group == oldSelf.group",message="nodeClassRef.group is immutable"
	// +kubebuilder:validation:XValidation:rule="self.kind == oldSelf.kind",message="nodeClassRef.kind is immutable"
	// +required
	NodeClassRef *NodeClassReference `json:"nodeClassRef"`

	// TerminationGracePeriod is the longest time draining may take once deletion starts. When it is
	// reached, remaining pods are deleted even if a PodDisruptionBudget or the
	// karpenter.sh/do-not-disrupt annotation blocks them. Unset means wait forever.
	// +kubebuilder:validation:Pattern=`^([0-9]+(s|m|h))+$`
	// +kubebuilder:validation:Type=string
	// +optional
	TerminationGracePeriod *metav1.Duration `json:"terminationGracePeriod,omitempty"`

	// ExpireAfter is how long after creation a node is forcefully replaced, or "Never".
	// +kubebuilder:default:="720h"
	// +optional
	ExpireAfter NillableDuration `json:"expireAfter,omitzero"`
}

// NodeClaimSpec returns the NodeClaim spec the template describes (without resource requests).
// Slices, maps and pointers are shared with the template, not copied.
func (in *NodeClaimTemplateSpec) NodeClaimSpec() NodeClaimSpec {
	return NodeClaimSpec{
		Taints:                 in.Taints,
		StartupTaints:          in.StartupTaints,
		Requirements:           in.Requirements,
		NodeClassRef:           in.NodeClassRef,
		TerminationGracePeriod: in.TerminationGracePeriod,
		ExpireAfter:            in.ExpireAfter,
	}
}

// NodePool is a set of constraints and policies from which Karpenter launches nodes for pending
// pods (or, when spec.replicas is set, keeps a fixed number of nodes).
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=nodepools,scope=Cluster,categories=karpenter,shortName={np,nps}
// +kubebuilder:storageversion
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.nodes
// +kubebuilder:printcolumn:name="NodeClass",type="string",JSONPath=".spec.template.spec.nodeClassRef.name"
// +kubebuilder:printcolumn:name="Nodes",type="string",JSONPath=".status.nodes"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type==\"Ready\")].status"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
// +kubebuilder:printcolumn:name="UpToDate",type="integer",JSONPath=".status.rollout.upToDate",priority=1
// +kubebuilder:printcolumn:name="Drifted",type="integer",JSONPath=".status.rollout.drifted",priority=1
// +kubebuilder:printcolumn:name="Disrupting",type="integer",JSONPath=".status.rollout.disrupting",priority=1
// +kubebuilder:printcolumn:name="Weight",type="integer",JSONPath=".spec.weight",priority=1
// +kubebuilder:printcolumn:name="CPU",type="string",JSONPath=".status.resources.cpu",priority=1
// +kubebuilder:printcolumn:name="Memory",type="string",JSONPath=".status.resources.memory",priority=1
type NodePool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the NodePool.
	// +required
	Spec NodePoolSpec `json:"spec"`

	// Status is the observed state of the NodePool.
	// +optional
	Status NodePoolStatus `json:"status,omitzero"`
}

// NodePoolList is a list of NodePools.
//
// +kubebuilder:object:root=true
type NodePoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// Items are the NodePools.
	Items []NodePool `json:"items"`
}
