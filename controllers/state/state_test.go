package state

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

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/testsupport/fixtures"
	"github.com/joiner-dev/joiner/testsupport/resourcestest"
)

// The objects below are built in memory; no API server is involved. fake.InstanceTypes(4) gives
// fake-it-0 .. fake-it-3 with 1..4 cpus, 2..8Gi of memory and 10..40 pods.

func byInstanceTypeName(its []*cloudprovider.InstanceType) map[string]*cloudprovider.InstanceType {
	out := map[string]*cloudprovider.InstanceType{}
	for _, it := range its {
		out[it.Name] = it
	}
	return out
}

func TestNodePoolRemaining(t *testing.T) {
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
			claims: []karpv1.NodeClaim{fixtures.NodeClaim("c1", "a", fixtures.LaunchedWith(resourcestest.List("cpu", "4")))},
			want:   nil,
		},
		{
			name:   "empty limits mean unlimited",
			limits: corev1.ResourceList{},
			claims: []karpv1.NodeClaim{fixtures.NodeClaim("c1", "a", fixtures.LaunchedWith(resourcestest.List("cpu", "4")))},
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
			claims: []karpv1.NodeClaim{fixtures.NodeClaim("c1", "a", fixtures.LaunchedWith(resourcestest.List("cpu", "3", "memory", "5Gi")),
				fixtures.InstanceTypeOptions(corev1.NodeSelectorOpIn, "fake-it-3"))},
			want: resourcestest.List("cpu", "7", "memory", "27Gi"),
		},
		{
			name:   "a NodeClaim not launched yet counts its largest option",
			limits: resourcestest.List("cpu", "10", "memory", "32Gi"),
			claims: []karpv1.NodeClaim{fixtures.NodeClaim("c1", "a", fixtures.Requesting(resourcestest.List("cpu", "1")),
				fixtures.InstanceTypeOptions(corev1.NodeSelectorOpIn, "fake-it-0", "fake-it-3", "fake-it-1"))},
			want: resourcestest.List("cpu", "6", "memory", "24Gi"),
		},
		{
			name:   "unknown instance types among the options are ignored",
			limits: resourcestest.List("cpu", "10"),
			claims: []karpv1.NodeClaim{fixtures.NodeClaim("c1", "a", fixtures.InstanceTypeOptions(corev1.NodeSelectorOpIn, "fake-it-1", "retired-type"))},
			want:   resourcestest.List("cpu", "8"),
		},
		{
			name:   "without a known option the requests count",
			limits: resourcestest.List("cpu", "10", "memory", "32Gi"),
			claims: []karpv1.NodeClaim{fixtures.NodeClaim("c1", "a", fixtures.Requesting(resourcestest.List("cpu", "3", "memory", "1Gi")),
				fixtures.InstanceTypeOptions(corev1.NodeSelectorOpIn, "retired-type"))},
			want: resourcestest.List("cpu", "7", "memory", "31Gi"),
		},
		{
			name:   "launched and in-flight NodeClaims add up",
			limits: resourcestest.List("cpu", "10"),
			claims: []karpv1.NodeClaim{
				fixtures.NodeClaim("c1", "a", fixtures.LaunchedWith(resourcestest.List("cpu", "4"))),
				fixtures.NodeClaim("c2", "a", fixtures.InstanceTypeOptions(corev1.NodeSelectorOpIn, "fake-it-1")),
			},
			want: resourcestest.List("cpu", "4"),
		},
		{
			name:   "nodes counts NodeClaims, launched or not",
			limits: resourcestest.List("nodes", "3"),
			claims: []karpv1.NodeClaim{
				fixtures.NodeClaim("c1", "a", fixtures.LaunchedWith(resourcestest.List("cpu", "4"))),
				fixtures.NodeClaim("c2", "a"),
			},
			want: resourcestest.List("nodes", "1"),
		},
		{
			name:   "never below zero",
			limits: resourcestest.List("cpu", "2", "nodes", "1"),
			claims: []karpv1.NodeClaim{
				fixtures.NodeClaim("c1", "a", fixtures.LaunchedWith(resourcestest.List("cpu", "4"))),
				fixtures.NodeClaim("c2", "a", fixtures.LaunchedWith(resourcestest.List("cpu", "4"))),
			},
			want: resourcestest.List("cpu", "0", "nodes", "0"),
		},
		{
			name:   "NodeClaims of other NodePools are ignored",
			limits: resourcestest.List("cpu", "10", "nodes", "2"),
			claims: []karpv1.NodeClaim{
				fixtures.NodeClaim("c1", "b", fixtures.LaunchedWith(resourcestest.List("cpu", "8"))),
				fixtures.NodeClaim("c2", "", fixtures.LaunchedWith(resourcestest.List("cpu", "8"))),
				fixtures.NodeClaim("c3", "a", fixtures.LaunchedWith(resourcestest.List("cpu", "1"))),
			},
			want: resourcestest.List("cpu", "9", "nodes", "1"),
		},
		{
			name:   "only limited resources are listed",
			limits: resourcestest.List("memory", "16Gi"),
			claims: []karpv1.NodeClaim{fixtures.NodeClaim("c1", "a", fixtures.LaunchedWith(resourcestest.List("cpu", "4", "memory", "4Gi")))},
			want:   resourcestest.List("memory", "12Gi"),
		},
	}
	its := fake.InstanceTypes(4)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := NodePoolRemaining(limited(tt.limits), tt.claims, its)
			if !resourcestest.Equal(got, tt.want) {
				t.Errorf("NodePoolRemaining = %s, want %s", resourcestest.Describe(got), resourcestest.Describe(tt.want))
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
			nc:   fixtures.NodeClaim("c", "a", fixtures.Requesting(requests), fixtures.InstanceTypeOptions(corev1.NodeSelectorOpIn, "tall")),
			want: resourcestest.List("cpu", "8", "memory", "2Gi", "pods", "5"),
		},
		{
			name: "the largest per resource, across options",
			nc:   fixtures.NodeClaim("c", "a", fixtures.Requesting(requests), fixtures.InstanceTypeOptions(corev1.NodeSelectorOpIn, "tall", "wide")),
			want: resourcestest.List("cpu", "8", "memory", "16Gi", "pods", "5", "nvidia.com/gpu", "1"),
		},
		{
			name: "unknown names are ignored",
			nc:   fixtures.NodeClaim("c", "a", fixtures.Requesting(requests), fixtures.InstanceTypeOptions(corev1.NodeSelectorOpIn, "retired-type", "tall")),
			want: resourcestest.List("cpu", "8", "memory", "2Gi", "pods", "5"),
		},
		{
			name: "only unknown names fall back to the requests",
			nc:   fixtures.NodeClaim("c", "a", fixtures.Requesting(requests), fixtures.InstanceTypeOptions(corev1.NodeSelectorOpIn, "retired-type")),
			want: requests,
		},
		{
			name: "no instance-type requirement falls back to the requests",
			nc:   fixtures.NodeClaim("c", "a", fixtures.Requesting(requests)),
			want: requests,
		},
		{
			name: "a NotIn requirement lists no options",
			nc:   fixtures.NodeClaim("c", "a", fixtures.Requesting(requests), fixtures.InstanceTypeOptions(corev1.NodeSelectorOpNotIn, "tall")),
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
				fixtures.Pod("unschedulable"),
				fixtures.Pod("not-marked", fixtures.NotMarkedUnschedulable),
				fixtures.Pod("nominated-by-kube-scheduler", fixtures.NominatedByKubeScheduler),
				fixtures.Pod("daemon", fixtures.OwnedByDaemonSet),
				fixtures.Pod("deleting", fixtures.PodDeleting),
				fixtures.Pod("succeeded", fixtures.InPhase(corev1.PodSucceeded)),
				fixtures.Pod("failed", fixtures.InPhase(corev1.PodFailed)),
			}},
			want: inputSummary{pending: []string{"unschedulable"}},
		},
		{
			name: "bound pods go with their node, terminal ones are left out",
			state: ClusterState{
				Nodes: []corev1.Node{fixtures.Node("n1"), fixtures.Node("n2")},
				Pods: []corev1.Pod{
					fixtures.Pod("running", fixtures.BoundTo("n1")),
					fixtures.Pod("done", fixtures.BoundTo("n1"), fixtures.InPhase(corev1.PodSucceeded)),
					fixtures.Pod("elsewhere", fixtures.BoundTo("gone-node")),
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
				NodeClaims: []karpv1.NodeClaim{fixtures.NodeClaim("nc1", "a", fixtures.LaunchedWith(resourcestest.List("cpu", "4")))},
				Pods:       []corev1.Pod{fixtures.Pod("waiting"), fixtures.Pod("orphaned"), fixtures.Pod("fresh")},
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
				NodeClaims: []karpv1.NodeClaim{fixtures.NodeClaim("nc1", "a", fixtures.RegisteredAs("fake:///1"), fixtures.ClaimInitialized)},
				Nodes:      []corev1.Node{fixtures.Node("n1", fixtures.WithProviderID("fake:///1"))},
				Pods:       []corev1.Pod{fixtures.Pod("bound", fixtures.BoundTo("n1")), fixtures.Pod("nominated")},
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
					fixtures.NodeClaim("nc-starting", "a", fixtures.RegisteredAs("fake:///1")),
					fixtures.NodeClaim("nc-initialized", "a", fixtures.RegisteredAs("fake:///2"), fixtures.ClaimInitialized),
				},
				Nodes: []corev1.Node{
					fixtures.Node("ready-but-starting", fixtures.WithProviderID("fake:///1")),
					fixtures.Node("initialized", fixtures.WithProviderID("fake:///2"), fixtures.NodeNotReady),
					fixtures.Node("unmanaged-ready", fixtures.WithProviderID("other:///3")),
					fixtures.Node("unmanaged-not-ready", fixtures.NodeNotReady),
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
					fixtures.NodeClaim("nc-deleting", "a", fixtures.ClaimDeleting),
					fixtures.NodeClaim("nc-registered-deleting", "a", fixtures.RegisteredAs("fake:///1"), fixtures.ClaimDeleting),
					fixtures.NodeClaim("nc-live", "a"),
				},
				Nodes: []corev1.Node{
					fixtures.Node("n-deleting", fixtures.NodeDeleting),
					fixtures.Node("n-of-deleting-claim", fixtures.WithProviderID("fake:///1")),
					fixtures.Node("n-live"),
				},
				Pods: []corev1.Pod{fixtures.Pod("on-deleting", fixtures.BoundTo("n-deleting"))},
			},
			want: inputSummary{existing: map[string]existingSummary{
				"nc-live": {},
				"n-live":  {initialized: true},
			}},
		},
		{
			name: "static, invalid, not ready, deleting NodePools and those without instance types are skipped",
			state: ClusterState{NodePools: []karpv1.NodePool{
				fixtures.NodePool("plain"),
				fixtures.NodePool("static", fixtures.PoolStatic),
				fixtures.NodePool("invalid", fixtures.PoolCondition(karpv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, "Invalid", "bad"),
					fixtures.PoolReady(metav1.ConditionTrue)),
				fixtures.NodePool("not-ready", fixtures.PoolReady(metav1.ConditionFalse)),
				fixtures.NodePool("ready", fixtures.PoolReady(metav1.ConditionTrue)),
				fixtures.NodePool("readiness-unknown", fixtures.PoolReady(metav1.ConditionUnknown)),
				fixtures.NodePool("deleting", fixtures.PoolDeleting),
				fixtures.NodePool("broken"),
			}},
			want: inputSummary{nodePools: []string{"plain", "ready", "readiness-unknown"}},
		},
		{
			name: "a limited NodePool comes with what its NodeClaims leave",
			state: ClusterState{
				NodePools: []karpv1.NodePool{
					fixtures.NodePool("limited", fixtures.PoolLimits(resourcestest.List("cpu", "10", "nodes", "5"))),
					fixtures.NodePool("unlimited"),
				},
				NodeClaims: []karpv1.NodeClaim{
					fixtures.NodeClaim("nc1", "limited", fixtures.LaunchedWith(resourcestest.List("cpu", "4"))),
					fixtures.NodeClaim("nc2", "limited", fixtures.InstanceTypeOptions(corev1.NodeSelectorOpIn, "fake-it-1")),
					fixtures.NodeClaim("nc3", "unlimited", fixtures.LaunchedWith(resourcestest.List("cpu", "4"))),
				},
			},
			want: inputSummary{
				existing:  map[string]existingSummary{"nc1": {}, "nc2": {}, "nc3": {}},
				nodePools: []string{"limited cpu=4,nodes=3", "unlimited"},
			},
		},
		{
			name:  "one pod per DaemonSet, from its template",
			state: ClusterState{DaemonSets: []appsv1.DaemonSet{fixtures.DaemonSet("logs"), fixtures.DaemonSet("metrics")}},
			want:  inputSummary{daemonPods: []string{"logs", "metrics"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := fake.New(fake.InstanceTypes(4)...)
			cp.ErrorsForNodePool = map[string]error{"broken": errors.New("node class not found")}
			opts := scheduling.Options{MaxInstanceTypes: 7}
			in, err := BuildInput(context.Background(), cp, &tt.state, tt.nominated, opts, logr.Discard())
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
