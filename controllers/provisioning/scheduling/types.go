package scheduling

import (
	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"
)

// PreferencePolicy says whether soft scheduling constraints count.
type PreferencePolicy string

const (
	// PreferencePolicyRespect treats preferred node affinity, preferred pod (anti-)affinity,
	// ScheduleAnyway topology spread and PreferNoSchedule taints as constraints, dropping them
	// one at a time only when a pod cannot be placed otherwise. It is the default.
	PreferencePolicyRespect PreferencePolicy = "Respect"
	// PreferencePolicyIgnore ignores every soft constraint.
	PreferencePolicyIgnore PreferencePolicy = "Ignore"
)

// MinValuesPolicy says what to do when a NodePool's minValues cannot be met.
type MinValuesPolicy string

const (
	// MinValuesPolicyStrict leaves a pod unscheduled rather than plan a NodeClaim whose instance
	// types miss a minValues. It is the default.
	MinValuesPolicyStrict MinValuesPolicy = "Strict"
	// MinValuesPolicyBestEffort plans the NodeClaim anyway and marks it MinValuesRelaxed.
	MinValuesPolicyBestEffort MinValuesPolicy = "BestEffort"
)

// DefaultMaxInstanceTypes is how many instance-type options a planned NodeClaim keeps when
// Options.MaxInstanceTypes is zero: enough for the launch to find spot capacity, few enough to
// keep the NodeClaim small.
const DefaultMaxInstanceTypes = 60

// Options tune a simulation. The zero value respects preferences, enforces minValues and keeps
// DefaultMaxInstanceTypes options per NodeClaim.
type Options struct {
	// PreferencePolicy is Respect ("" means Respect) or Ignore.
	PreferencePolicy PreferencePolicy
	// MinValuesPolicy is Strict ("" means Strict) or BestEffort.
	MinValuesPolicy MinValuesPolicy
	// MaxInstanceTypes caps the instance-type options of each planned NodeClaim, cheapest first;
	// more are kept only when a minValues needs them. 0 means DefaultMaxInstanceTypes.
	MaxInstanceTypes int
}

// NodePool is a NodePool the simulation may launch NodeClaims from.
type NodePool struct {
	// NodePool is the NodePool; only its spec.template, spec.weight and name are read.
	NodePool *karpv1.NodePool
	// InstanceTypes are the instance types its node class offers (CloudProvider.GetInstanceTypes).
	InstanceTypes []*cloudprovider.InstanceType
	// Remaining is what is left of spec.limits after the NodePool's current nodes and in-flight
	// NodeClaims: limits minus usage, per resource ("nodes" counts NodeClaims). A resource not
	// listed is unlimited; nil means no limits.
	Remaining corev1.ResourceList
}

// ExistingNode is a node, or an in-flight NodeClaim that has no node yet, that pods may be placed
// on. Its pods count for topology and its free capacity is Allocatable minus their requests.
type ExistingNode struct {
	// Name identifies the node in results and is its kubernetes.io/hostname domain.
	Name string
	// Labels are the node's labels (for a NodeClaim: its labels, which fix what is known).
	Labels map[string]string
	// Taints are the taints pods must tolerate. Leave out taints that will go away by
	// themselves (startup taints, karpenter.sh/unregistered, not-ready); NewExistingNode does.
	Taints []corev1.Taint
	// Allocatable is the capacity pods can request.
	Allocatable corev1.ResourceList
	// Pods are the pods bound (or nominated) to the node.
	Pods []*corev1.Pod
	// NodePool is the name of the NodePool that launched it, "" for unmanaged nodes.
	NodePool string
	// Initialized is false for in-flight NodeClaims and nodes still starting. Pods prefer
	// initialized nodes.
	Initialized bool
}

// Input is everything a simulation reads.
type Input struct {
	// Pods are the pending pods to place. Their order does not matter.
	Pods []*corev1.Pod
	// ExistingNodes are nodes and in-flight NodeClaims with room the pods may use.
	ExistingNodes []*ExistingNode
	// NodePools are the NodePools new NodeClaims may come from. They are tried in weight order
	// (higher first, unset counting as 0), then by name.
	NodePools []NodePool
	// DaemonSetPods are one pod per DaemonSet (its template); a new node pays for every one it
	// would run: whose tolerations cover the NodePool's taints and whose node affinity allows it,
	// on the instance types and offerings it allows.
	DaemonSetPods []*corev1.Pod
	// Volumes are the cluster's PersistentVolumeClaims, PersistentVolumes and StorageClasses
	// (NewVolumes): a pod with volumes is placed only where they can be used. nil knows no
	// storage, and volumes then restrict nothing.
	Volumes *Volumes
	// Options tune the simulation.
	Options Options
}

// Results are the decisions of a simulation.
type Results struct {
	// ExistingNodes are the existing nodes that received pods, in input order.
	ExistingNodes []ExistingNodePlacement
	// NewNodeClaims are the NodeClaims to launch, each with its pods.
	NewNodeClaims []*NodeClaimPlan
	// PodErrors explain, for every pod that could not be placed, why.
	PodErrors []PodError
}

// ExistingNodePlacement is a set of pods placed on one existing node.
type ExistingNodePlacement struct {
	// Node is the node, as given in Input.
	Node *ExistingNode
	// Pods are the pods placed on it.
	Pods []*corev1.Pod
}

// NodeClaimPlan is a NodeClaim to launch for some pods.
type NodeClaimPlan struct {
	// NodePool is the NodePool it comes from.
	NodePool *karpv1.NodePool
	// Hostname is the placeholder hostname the simulation used for it (its hostname topology
	// domain); the real node gets its own.
	Hostname string
	// Requirements are the NodePool's requirements narrowed by the pods (node affinity, topology
	// domains), plus the instance types In InstanceTypeOptions.
	Requirements requirements.Requirements
	// InstanceTypeOptions are the instance types that fit the pods, cheapest first, at most
	// Options.MaxInstanceTypes of them (more only for minValues), within the NodePool's limits.
	InstanceTypeOptions cloudprovider.InstanceTypes
	// Requests are what the node must offer: the pods' requests plus the overhead of the
	// DaemonSets that run on every node of the NodePool. A DaemonSet that runs on some instance
	// types or offerings only is charged to their allocatable instead, which InstanceTypeOptions
	// already account for.
	Requests corev1.ResourceList
	// Pods are the pods planned onto it.
	Pods []*corev1.Pod
	// Price is the hourly price of the cheapest option's cheapest compatible offering.
	Price float64
	// MinValuesRelaxed is set when MinValuesPolicy BestEffort let the plan miss a minValues.
	MinValuesRelaxed bool
}

// PodError is a pod that could not be placed and why.
type PodError struct {
	// Pod is the pod.
	Pod *corev1.Pod
	// Err is usually an *UnschedulableError.
	Err error
}
