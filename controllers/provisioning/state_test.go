package provisioning

import (
	"context"
	"errors"
	"reflect"
	"sort"
	"testing"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/testsupport/resourcestest"
)

// The objects below are built in memory; no API server is involved. fake.InstanceTypes(4) gives
// fake-it-0 .. fake-it-3 with 1..4 cpus, 2..8Gi of memory and 10..40 pods.

type claimOption func(*karpv1.NodeClaim)

// testNodeClaim returns a NodeClaim of the NodePool (its karpenter.sh/nodepool label); "" leaves
// the label out.
func testNodeClaim(name, nodePool string, opts ...claimOption) karpv1.NodeClaim {
	nc := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if nodePool != "" {
		nc.Labels[karpv1.NodePoolLabelKey] = nodePool
	}
	for _, o := range opts {
		o(&nc)
	}
	return nc
}

// launchedWith sets status.capacity, as a launch does.
func launchedWith(capacity corev1.ResourceList) claimOption {
	return func(nc *karpv1.NodeClaim) { nc.Status.Capacity = capacity }
}

// instanceTypeOptions adds a requirement on node.kubernetes.io/instance-type.
func instanceTypeOptions(op corev1.NodeSelectorOperator, names ...string) claimOption {
	return func(nc *karpv1.NodeClaim) {
		nc.Spec.Requirements = append(nc.Spec.Requirements, karpv1.NodeSelectorRequirementWithMinValues{
			Key: corev1.LabelInstanceTypeStable, Operator: op, Values: names,
		})
	}
}

// requesting sets spec.resources.requests.
func requesting(requests corev1.ResourceList) claimOption {
	return func(nc *karpv1.NodeClaim) { nc.Spec.Resources.Requests = requests }
}

// registeredAs gives the NodeClaim the provider ID its Node carries.
func registeredAs(providerID string) claimOption {
	return func(nc *karpv1.NodeClaim) { nc.Status.ProviderID = providerID }
}

func claimInitialized(nc *karpv1.NodeClaim) {
	nc.Status.Conditions = append(nc.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeInitialized, Status: metav1.ConditionTrue})
}

func claimDeleting(nc *karpv1.NodeClaim) {
	nc.DeletionTimestamp = &metav1.Time{}
}

func byInstanceTypeName(its []*cloudprovider.InstanceType) map[string]*cloudprovider.InstanceType {
	out := map[string]*cloudprovider.InstanceType{}
	for _, it := range its {
		out[it.Name] = it
	}
	return out
}

func TestRemaining(t *testing.T) {
	limited := func(limits corev1.ResourceList) *karpv1.NodePool {
		return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: karpv1.NodePoolSpec{Limits: limits}}
	}
	tests := []struct {
		name   string
		limits corev1.ResourceList
		claims []karpv1.NodeClaim
		want   corev1.ResourceList
	}{
		{
			name:   "no limits means unlimited",
			claims: []karpv1.NodeClaim{testNodeClaim("c1", "a", launchedWith(resourcestest.List("cpu", "4")))},
			want:   nil,
		},
		{
			name:   "empty limits mean unlimited",
			limits: corev1.ResourceList{},
			claims: []karpv1.NodeClaim{testNodeClaim("c1", "a", launchedWith(resourcestest.List("cpu", "4")))},
			want:   nil,
		},
		{
			name:   "nothing used leaves the whole limit",
			limits: resourcestest.List("cpu", "10", "nodes", "3"),
			want:   resourcestest.List("cpu", "10", "nodes", "3"),
		},
		{
			name:   "a launched NodeClaim counts its status.capacity, not its options",
			limits: resourcestest.List("cpu", "10", "memory", "32Gi"),
			claims: []karpv1.NodeClaim{testNodeClaim("c1", "a", launchedWith(resourcestest.List("cpu", "3", "memory", "5Gi")),
				instanceTypeOptions(corev1.NodeSelectorOpIn, "fake-it-3"))},
			want: resourcestest.List("cpu", "7", "memory", "27Gi"),
		},
		{
			name:   "a NodeClaim not launched yet counts its largest option",
			limits: resourcestest.List("cpu", "10", "memory", "32Gi"),
			claims: []karpv1.NodeClaim{testNodeClaim("c1", "a", requesting(resourcestest.List("cpu", "1")),
				instanceTypeOptions(corev1.NodeSelectorOpIn, "fake-it-0", "fake-it-3", "fake-it-1"))},
			want: resourcestest.List("cpu", "6", "memory", "24Gi"),
		},
		{
			name:   "unknown instance types among the options are ignored",
			limits: resourcestest.List("cpu", "10"),
			claims: []karpv1.NodeClaim{testNodeClaim("c1", "a", instanceTypeOptions(corev1.NodeSelectorOpIn, "fake-it-1", "retired-type"))},
			want:   resourcestest.List("cpu", "8"),
		},
		{
			name:   "without a known option the requests count",
			limits: resourcestest.List("cpu", "10", "memory", "32Gi"),
			claims: []karpv1.NodeClaim{testNodeClaim("c1", "a", requesting(resourcestest.List("cpu", "3", "memory", "1Gi")),
				instanceTypeOptions(corev1.NodeSelectorOpIn, "retired-type"))},
			want: resourcestest.List("cpu", "7", "memory", "31Gi"),
		},
		{
			name:   "launched and in-flight NodeClaims add up",
			limits: resourcestest.List("cpu", "10"),
			claims: []karpv1.NodeClaim{
				testNodeClaim("c1", "a", launchedWith(resourcestest.List("cpu", "4"))),
				testNodeClaim("c2", "a", instanceTypeOptions(corev1.NodeSelectorOpIn, "fake-it-1")),
			},
			want: resourcestest.List("cpu", "4"),
		},
		{
			name:   "nodes counts NodeClaims, launched or not",
			limits: resourcestest.List("nodes", "3"),
			claims: []karpv1.NodeClaim{
				testNodeClaim("c1", "a", launchedWith(resourcestest.List("cpu", "4"))),
				testNodeClaim("c2", "a"),
			},
			want: resourcestest.List("nodes", "1"),
		},
		{
			name:   "never below zero",
			limits: resourcestest.List("cpu", "2", "nodes", "1"),
			claims: []karpv1.NodeClaim{
				testNodeClaim("c1", "a", launchedWith(resourcestest.List("cpu", "4"))),
				testNodeClaim("c2", "a", launchedWith(resourcestest.List("cpu", "4"))),
			},
			want: resourcestest.List("cpu", "0", "nodes", "0"),
		},
		{
			name:   "NodeClaims of other NodePools are ignored",
			limits: resourcestest.List("cpu", "10", "nodes", "2"),
			claims: []karpv1.NodeClaim{
				testNodeClaim("c1", "b", launchedWith(resourcestest.List("cpu", "8"))),
				testNodeClaim("c2", "", launchedWith(resourcestest.List("cpu", "8"))),
				testNodeClaim("c3", "a", launchedWith(resourcestest.List("cpu", "1"))),
			},
			want: resourcestest.List("cpu", "9", "nodes", "1"),
		},
		{
			name:   "only limited resources are listed",
			limits: resourcestest.List("memory", "16Gi"),
			claims: []karpv1.NodeClaim{testNodeClaim("c1", "a", launchedWith(resourcestest.List("cpu", "4", "memory", "4Gi")))},
			want:   resourcestest.List("memory", "12Gi"),
		},
	}
	its := fake.InstanceTypes(4)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := remaining(limited(tt.limits), tt.claims, its)
			if !resourcestest.Equal(got, tt.want) {
				t.Errorf("remaining = %s, want %s", resourcestest.Describe(got), resourcestest.Describe(tt.want))
			}
		})
	}
}

func TestLargestOption(t *testing.T) {
	// tall has the most cpu, wide the most memory and both the default 5 pods.
	tall := fake.NewInstanceType(fake.InstanceTypeOptions{Name: "tall", Capacity: resourcestest.List("cpu", "8", "memory", "2Gi")})
	wide := fake.NewInstanceType(fake.InstanceTypeOptions{Name: "wide", Capacity: resourcestest.List("cpu", "2", "memory", "16Gi", "nvidia.com/gpu", "1")})
	byName := byInstanceTypeName([]*cloudprovider.InstanceType{tall, wide})
	requests := resourcestest.List("cpu", "500m", "memory", "1Gi")
	tests := []struct {
		name string
		nc   karpv1.NodeClaim
		want corev1.ResourceList
	}{
		{
			name: "one option gives its capacity",
			nc:   testNodeClaim("c", "a", requesting(requests), instanceTypeOptions(corev1.NodeSelectorOpIn, "tall")),
			want: resourcestest.List("cpu", "8", "memory", "2Gi", "pods", "5"),
		},
		{
			name: "the largest per resource, across options",
			nc:   testNodeClaim("c", "a", requesting(requests), instanceTypeOptions(corev1.NodeSelectorOpIn, "tall", "wide")),
			want: resourcestest.List("cpu", "8", "memory", "16Gi", "pods", "5", "nvidia.com/gpu", "1"),
		},
		{
			name: "unknown names are ignored",
			nc:   testNodeClaim("c", "a", requesting(requests), instanceTypeOptions(corev1.NodeSelectorOpIn, "retired-type", "tall")),
			want: resourcestest.List("cpu", "8", "memory", "2Gi", "pods", "5"),
		},
		{
			name: "only unknown names fall back to the requests",
			nc:   testNodeClaim("c", "a", requesting(requests), instanceTypeOptions(corev1.NodeSelectorOpIn, "retired-type")),
			want: requests,
		},
		{
			name: "no instance-type requirement falls back to the requests",
			nc:   testNodeClaim("c", "a", requesting(requests)),
			want: requests,
		},
		{
			name: "a NotIn requirement lists no options",
			nc:   testNodeClaim("c", "a", requesting(requests), instanceTypeOptions(corev1.NodeSelectorOpNotIn, "tall")),
			want: requests,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc := tt.nc
			if got := largestOption(&nc, byName); !resourcestest.Equal(got, tt.want) {
				t.Errorf("largestOption = %s, want %s", resourcestest.Describe(got), resourcestest.Describe(tt.want))
			}
		})
	}
}

type podOption func(*corev1.Pod)

// testPod returns a pod that kube-scheduler marked Unschedulable (a provisionable one, unless an
// option changes that). Its UID is "uid-<name>".
func testPod(name string, opts ...podOption) corev1.Pod {
	pod := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Resources: corev1.ResourceRequirements{Requests: resourcestest.List("cpu", "100m", "memory", "64Mi")},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		}}},
	}
	for _, o := range opts {
		o(&pod)
	}
	return pod
}

// boundTo binds the pod to the node, running.
func boundTo(node string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.NodeName = node
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = nil
	}
}

// inPhase sets the pod's phase.
func inPhase(phase corev1.PodPhase) podOption {
	return func(p *corev1.Pod) { p.Status.Phase = phase }
}

func notMarkedUnschedulable(p *corev1.Pod) { p.Status.Conditions = nil }

func nominatedByKubeScheduler(p *corev1.Pod) { p.Status.NominatedNodeName = "some-node" }

func podDeleting(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }

func ownedByDaemonSet(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "ds-uid", Controller: ptr.To(true)}}
}

type nodeOption func(*corev1.Node)

// testNode returns a Ready node of NodePool "a" with 4 cpu and 8Gi allocatable.
func testNode(name string, opts ...nodeOption) corev1.Node {
	node := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			karpv1.NodePoolLabelKey: "a", corev1.LabelHostname: name,
		}},
		Status: corev1.NodeStatus{
			Allocatable: resourcestest.List("cpu", "4", "memory", "8Gi", "pods", "40"),
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, o := range opts {
		o(&node)
	}
	return node
}

func nodeNotReady(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }

func nodeDeleting(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{} }

// withProviderID sets the node's spec.providerID.
func withProviderID(id string) nodeOption {
	return func(n *corev1.Node) { n.Spec.ProviderID = id }
}

type poolOption func(*karpv1.NodePool)

func testNodePool(name string, opts ...poolOption) karpv1.NodePool {
	np := karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, o := range opts {
		o(&np)
	}
	return np
}

// poolReady sets the NodePool's Ready condition.
func poolReady(status metav1.ConditionStatus) poolOption {
	return func(np *karpv1.NodePool) {
		np.Status.Conditions = append(np.Status.Conditions, metav1.Condition{Type: karpv1.ConditionTypeReady, Status: status, Reason: "Test"})
	}
}

func poolStatic(np *karpv1.NodePool) { np.Spec.Replicas = ptr.To(int64(2)) }

func poolDeleting(np *karpv1.NodePool) { np.DeletionTimestamp = &metav1.Time{} }

// poolLimits sets spec.limits.
func poolLimits(limits corev1.ResourceList) poolOption {
	return func(np *karpv1.NodePool) { np.Spec.Limits = limits }
}

func testDaemonSet(app string) appsv1.DaemonSet {
	return appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "ds-" + app, Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: app, Resources: corev1.ResourceRequirements{Requests: resourcestest.List("cpu", "50m")},
			}}},
		}},
	}
}

// existingSummary is what a test checks of one scheduling.ExistingNode.
type existingSummary struct {
	pods        []string // sorted pod names
	initialized bool
}

// inputSummary is what a test checks of a scheduling.Input.
type inputSummary struct {
	pending  []string                   // sorted names of the pods to place
	existing map[string]existingSummary // by ExistingNode name
	// nodePools are the NodePools offered, in input order, each as "name" or, when limited,
	// "name remaining".
	nodePools  []string
	daemonPods []string // the "app" label of each DaemonSet pod, in order
}

func summarizeInput(in scheduling.Input) inputSummary {
	var s inputSummary
	for _, p := range in.Pods {
		s.pending = append(s.pending, p.Name)
	}
	sort.Strings(s.pending)
	for _, en := range in.ExistingNodes {
		if s.existing == nil {
			s.existing = map[string]existingSummary{}
		}
		var pods []string
		for _, p := range en.Pods {
			pods = append(pods, p.Name)
		}
		sort.Strings(pods)
		s.existing[en.Name] = existingSummary{pods: pods, initialized: en.Initialized}
	}
	for _, np := range in.NodePools {
		entry := np.NodePool.Name
		if np.Remaining != nil {
			entry += " " + resourcestest.Describe(np.Remaining)
		}
		s.nodePools = append(s.nodePools, entry)
	}
	for _, p := range in.DaemonSetPods {
		s.daemonPods = append(s.daemonPods, p.Labels["app"])
	}
	return s
}

func TestInput(t *testing.T) {
	tests := []struct {
		name      string
		state     ClusterState
		nominated map[types.UID]string
		want      inputSummary
	}{
		{
			name: "only provisionable pods are pending",
			state: ClusterState{Pods: []corev1.Pod{
				testPod("unschedulable"),
				testPod("not-marked", notMarkedUnschedulable),
				testPod("nominated-by-kube-scheduler", nominatedByKubeScheduler),
				testPod("daemon", ownedByDaemonSet),
				testPod("deleting", podDeleting),
				testPod("succeeded", inPhase(corev1.PodSucceeded)),
				testPod("failed", inPhase(corev1.PodFailed)),
			}},
			want: inputSummary{pending: []string{"unschedulable"}},
		},
		{
			name: "bound pods go with their node, terminal ones are left out",
			state: ClusterState{
				Nodes: []corev1.Node{testNode("n1"), testNode("n2")},
				Pods: []corev1.Pod{
					testPod("running", boundTo("n1")),
					testPod("done", boundTo("n1"), inPhase(corev1.PodSucceeded)),
					testPod("elsewhere", boundTo("gone-node")),
				},
			},
			want: inputSummary{existing: map[string]existingSummary{
				"n1": {pods: []string{"running"}, initialized: true},
				"n2": {initialized: true},
			}},
		},
		{
			name: "a nominated pod goes with its in-flight NodeClaim and is not provisioned again",
			state: ClusterState{
				NodeClaims: []karpv1.NodeClaim{testNodeClaim("nc1", "a", launchedWith(resourcestest.List("cpu", "4")))},
				Pods:       []corev1.Pod{testPod("waiting"), testPod("orphaned"), testPod("fresh")},
			},
			nominated: map[types.UID]string{"uid-waiting": "nc1", "uid-orphaned": "nc-gone"},
			want: inputSummary{
				pending:  []string{"fresh", "orphaned"},
				existing: map[string]existingSummary{"nc1": {pods: []string{"waiting"}}},
			},
		},
		{
			name: "a registered NodeClaim is its node, not also in flight",
			state: ClusterState{
				NodeClaims: []karpv1.NodeClaim{testNodeClaim("nc1", "a", registeredAs("fake:///1"), claimInitialized)},
				Nodes:      []corev1.Node{testNode("n1", withProviderID("fake:///1"))},
				Pods:       []corev1.Pod{testPod("bound", boundTo("n1")), testPod("nominated")},
			},
			nominated: map[types.UID]string{"uid-nominated": "nc1"},
			want: inputSummary{existing: map[string]existingSummary{
				"n1": {pods: []string{"bound", "nominated"}, initialized: true},
			}},
		},
		{
			name: "a node with a NodeClaim is initialized when the NodeClaim says so, else when Ready",
			state: ClusterState{
				NodeClaims: []karpv1.NodeClaim{
					testNodeClaim("nc-starting", "a", registeredAs("fake:///1")),
					testNodeClaim("nc-initialized", "a", registeredAs("fake:///2"), claimInitialized),
				},
				Nodes: []corev1.Node{
					testNode("ready-but-starting", withProviderID("fake:///1")),
					testNode("initialized", withProviderID("fake:///2"), nodeNotReady),
					testNode("unmanaged-ready", withProviderID("other:///3")),
					testNode("unmanaged-not-ready", nodeNotReady),
				},
			},
			want: inputSummary{existing: map[string]existingSummary{
				"ready-but-starting":  {initialized: false},
				"initialized":         {initialized: true},
				"unmanaged-ready":     {initialized: true},
				"unmanaged-not-ready": {initialized: false},
			}},
		},
		{
			name: "deleting Nodes and NodeClaims are left out",
			state: ClusterState{
				NodeClaims: []karpv1.NodeClaim{
					testNodeClaim("nc-deleting", "a", claimDeleting),
					testNodeClaim("nc-registered-deleting", "a", registeredAs("fake:///1"), claimDeleting),
					testNodeClaim("nc-live", "a"),
				},
				Nodes: []corev1.Node{
					testNode("n-deleting", nodeDeleting),
					testNode("n-of-deleting-claim", withProviderID("fake:///1")),
					testNode("n-live"),
				},
				Pods: []corev1.Pod{testPod("on-deleting", boundTo("n-deleting"))},
			},
			want: inputSummary{existing: map[string]existingSummary{
				"nc-live": {},
				"n-live":  {initialized: true},
			}},
		},
		{
			name: "static, invalid, not ready, deleting NodePools and those without instance types are skipped",
			state: ClusterState{NodePools: []karpv1.NodePool{
				testNodePool("plain"),
				testNodePool("static", poolStatic),
				testNodePool("invalid", poolCondition(karpv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, "Invalid", "bad"),
					poolReady(metav1.ConditionTrue)),
				testNodePool("not-ready", poolReady(metav1.ConditionFalse)),
				testNodePool("ready", poolReady(metav1.ConditionTrue)),
				testNodePool("readiness-unknown", poolReady(metav1.ConditionUnknown)),
				testNodePool("deleting", poolDeleting),
				testNodePool("broken"),
			}},
			want: inputSummary{nodePools: []string{"plain", "ready", "readiness-unknown"}},
		},
		{
			name: "a limited NodePool comes with what its NodeClaims leave",
			state: ClusterState{
				NodePools: []karpv1.NodePool{
					testNodePool("limited", poolLimits(resourcestest.List("cpu", "10", "nodes", "5"))),
					testNodePool("unlimited"),
				},
				NodeClaims: []karpv1.NodeClaim{
					testNodeClaim("nc1", "limited", launchedWith(resourcestest.List("cpu", "4"))),
					testNodeClaim("nc2", "limited", instanceTypeOptions(corev1.NodeSelectorOpIn, "fake-it-1")),
					testNodeClaim("nc3", "unlimited", launchedWith(resourcestest.List("cpu", "4"))),
				},
			},
			want: inputSummary{
				existing:  map[string]existingSummary{"nc1": {}, "nc2": {}, "nc3": {}},
				nodePools: []string{"limited cpu=4,nodes=3", "unlimited"},
			},
		},
		{
			name:  "one pod per DaemonSet, from its template",
			state: ClusterState{DaemonSets: []appsv1.DaemonSet{testDaemonSet("logs"), testDaemonSet("metrics")}},
			want:  inputSummary{daemonPods: []string{"logs", "metrics"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := fake.New(fake.InstanceTypes(4)...)
			cp.ErrorsForNodePool = map[string]error{"broken": errors.New("node class not found")}
			opts := scheduling.Options{MaxInstanceTypes: 7}
			p := &Provisioner{CloudProvider: cp, Log: logr.Discard(), Options: opts}
			in, err := p.input(context.Background(), &tt.state, tt.nominated)
			if err != nil {
				t.Fatalf("input: %v", err)
			}
			if got := summarizeInput(in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("input:\n got  %+v\n want %+v", got, tt.want)
			}
			if in.Options != opts {
				t.Errorf("Options = %+v, want the provisioner's %+v", in.Options, opts)
			}
			for _, np := range in.NodePools {
				if len(np.InstanceTypes) != 4 {
					t.Errorf("NodePool %s has %d instance types, want the provider's 4", np.NodePool.Name, len(np.InstanceTypes))
				}
			}
			for _, pod := range in.DaemonSetPods {
				if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Name != pod.Labels["app"] {
					t.Errorf("DaemonSet pod %v does not carry its template's spec", pod.Labels)
				}
			}
		})
	}
}
