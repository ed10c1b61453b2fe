package termination

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

func TestHoldsDrain(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	dsOwner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "ds", UID: "u", Controller: ptr.To(true)}
	rsOwner := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "u", Controller: ptr.To(true)}
	cases := []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{name: "running pod", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, want: true},
		{name: "replicaset pod", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{rsOwner}}}, want: true},
		{name: "succeeded pod", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, want: false},
		{name: "failed pod", pod: corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, want: false},
		// DaemonSet pods used to be left alone; they are drained now, after the other pods.
		{name: "daemonset pod", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{OwnerReferences: []metav1.OwnerReference{dsOwner}}}, want: true},
		{name: "mirror pod", pod: corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.MirrorPodAnnotationKey: "x"}}}, want: false},
		{
			name: "tolerates the disrupted taint",
			pod:  corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists}}}},
			want: false,
		},
		{
			name: "tolerates everything",
			pod:  corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}}},
			want: false,
		},
		{
			name: "tolerates only NoExecute of the disrupted key",
			pod: corev1.Pod{Spec: corev1.PodSpec{Tolerations: []corev1.Toleration{
				{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}}},
			want: true,
		},
		{
			name: "terminating pod",
			pod:  corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: now.Add(-10 * time.Second)}}},
			want: true,
		},
		{
			name: "pod stuck terminating",
			pod:  corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{Time: now.Add(-2 * time.Minute)}}},
			want: false,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := holdsDrain(&tc.pod, now); got != tc.want {
				t.Errorf("holdsDrain = %v, want %v", got, tc.want)
			}
		})
	}
}

// podOnNode returns a running pod on node "n" for the drain tests, changed by mutate.
func podOnNode(name string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: k8stypes.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: "n"},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func newDrainer(t *testing.T, now time.Time, pods ...*corev1.Pod) (*Drainer, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	objs := make([]client.Object, len(pods))
	for i := range pods {
		objs[i] = pods[i]
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).
		Build()
	m, err := NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	return NewDrainer(c, c, clocktesting.NewFakeClock(now), events.NewFakeRecorder(100), m), c
}

func remaining(t *testing.T, c client.Client) []string {
	t.Helper()
	var pods corev1.PodList
	if err := c.List(t.Context(), &pods); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// daemonSetPod makes a pod owned by a DaemonSet.
func daemonSetPod(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: p.Name, UID: "ds-" + p.UID, Controller: ptr.To(true)}}
}

func TestDrainEvictsGroupsInOrder(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d, c := newDrainer(t, now,
		podOnNode("app", nil),
		podOnNode("dns", func(p *corev1.Pod) { p.Spec.PriorityClassName = "system-cluster-critical" }),
		podOnNode("agent", daemonSetPod),
		podOnNode("proxy", func(p *corev1.Pod) { daemonSetPod(p); p.Spec.PriorityClassName = "system-node-critical" }),
		podOnNode("static", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
		podOnNode("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		podOnNode("elsewhere", func(p *corev1.Pod) { p.Spec.NodeName = "other" }),
	)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	passes := []struct {
		wantWaiting   []string
		wantRemaining []string
	}{
		{wantWaiting: []string{"default/agent", "default/app", "default/dns", "default/proxy"}, wantRemaining: []string{"agent", "dns", "done", "elsewhere", "proxy", "static"}},
		{wantWaiting: []string{"default/agent", "default/dns", "default/proxy"}, wantRemaining: []string{"dns", "done", "elsewhere", "proxy", "static"}},
		{wantWaiting: []string{"default/dns", "default/proxy"}, wantRemaining: []string{"done", "elsewhere", "proxy", "static"}},
		{wantWaiting: []string{"default/proxy"}, wantRemaining: []string{"done", "elsewhere", "static"}},
		{wantWaiting: nil, wantRemaining: []string{"done", "elsewhere", "static"}},
	}
	for i, pass := range passes {
		res, err := d.Drain(t.Context(), node, nil)
		if err != nil {
			t.Fatalf("pass %d: %v", i, err)
		}
		slices.Sort(res.Waiting)
		if !slices.Equal(res.Waiting, pass.wantWaiting) || res.Drained() != (pass.wantWaiting == nil) {
			t.Errorf("pass %d: waiting %v, want %v", i, res.Waiting, pass.wantWaiting)
		}
		if got := remaining(t, c); !slices.Equal(got, pass.wantRemaining) {
			t.Errorf("pass %d: pods %v, want %v", i, got, pass.wantRemaining)
		}
	}
}

func TestDrainGroups(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	critical := func(class string) func(*corev1.Pod) { return func(p *corev1.Pod) { p.Spec.PriorityClassName = class } }
	cases := []struct {
		name   string
		mutate func(*corev1.Pod)
		want   podClass
	}{
		{name: "ordinary pod", want: groupNonCritical},
		{name: "daemonset pod", mutate: daemonSetPod, want: groupNonCriticalDaemon},
		{name: "system-cluster-critical pod", mutate: critical("system-cluster-critical"), want: groupCritical},
		{name: "system-node-critical pod", mutate: critical("system-node-critical"), want: groupCritical},
		{name: "another priority class is not critical", mutate: critical("high"), want: groupNonCritical},
		{
			name: "critical daemonset pod", want: groupCriticalDaemon,
			mutate: func(p *corev1.Pod) { daemonSetPod(p); p.Spec.PriorityClassName = "system-node-critical" },
		},
		{name: "mirror (static) pod", mutate: func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }, want: classStays},
		{
			name: "tolerates the disrupted taint", want: classStays,
			mutate: func(p *corev1.Pod) {
				p.Spec.Tolerations = []corev1.Toleration{{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists}}
			},
		},
		{
			name: "critical daemonset pod tolerating every taint", want: classStays,
			mutate: func(p *corev1.Pod) {
				daemonSetPod(p)
				p.Spec.PriorityClassName = "system-node-critical"
				p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			},
		},
		{name: "succeeded pod", mutate: func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, want: classFinished},
		{name: "failed daemonset pod", mutate: func(p *corev1.Pod) { daemonSetPod(p); p.Status.Phase = corev1.PodFailed }, want: classFinished},
		{name: "terminating pod", mutate: func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now.Add(-10 * time.Second)} }, want: groupNonCritical},
		{name: "stuck terminating pod", mutate: func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now.Add(-2 * time.Minute)} }, want: classStays},
		{
			name: "do-not-disrupt pod is waited on in its group", want: groupCritical,
			mutate: func(p *corev1.Pod) {
				p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
				p.Spec.PriorityClassName = "system-cluster-critical"
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := podOnNode("p", tc.mutate)
			if got := classify(pod, now); got != tc.want {
				t.Errorf("classify = %d, want %d", got, tc.want)
			}
			groups := groupForDrain([]corev1.Pod{*pod}, now)
			for g, pods := range groups {
				if in := len(pods) == 1; in != (podClass(g) == tc.want) {
					t.Errorf("groupForDrain puts it in group %d: %v, want group %d", g, in, tc.want)
				}
			}
		})
	}
}

func TestDrainWaitsOnDoNotDisruptBeforeTheNextGroup(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	d, c := newDrainer(t, now,
		podOnNode("protected", func(p *corev1.Pod) { p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"} }),
		podOnNode("agent", daemonSetPod),
	)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	for i := range 3 {
		res, err := d.Drain(t.Context(), node, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Waiting) != 2 {
			t.Errorf("pass %d: waiting %v, want both pods", i, res.Waiting)
		}
		if got := remaining(t, c); !slices.Equal(got, []string{"agent", "protected"}) {
			t.Errorf("pass %d: pods %v: the do-not-disrupt pod must hold the DaemonSet group back", i, got)
		}
	}
}

func TestDrainHonoursTheDeadline(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	protected := func(grace int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Annotations = map[string]string{karpv1.DoNotDisruptAnnotationKey: "true"}
			p.Spec.TerminationGracePeriodSeconds = ptr.To(grace)
		}
	}
	cases := []struct {
		name          string
		deadline      *time.Time
		wantRemaining []string
	}{
		{name: "no deadline keeps do-not-disrupt pods", deadline: nil, wantRemaining: []string{"long-grace", "short-grace"}},
		{name: "a far deadline keeps them", deadline: ptr.To(now.Add(time.Hour)), wantRemaining: []string{"long-grace", "short-grace"}},
		{
			name: "a pod whose grace period reaches past the deadline goes first", deadline: ptr.To(now.Add(45 * time.Second)),
			wantRemaining: []string{"short-grace"},
		},
		{name: "a passed deadline deletes them all", deadline: ptr.To(now.Add(-time.Second)), wantRemaining: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d, c := newDrainer(t, now, podOnNode("long-grace", protected(60)), podOnNode("short-grace", protected(10)))
			res, err := d.Drain(t.Context(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, tc.deadline)
			if err != nil {
				t.Fatal(err)
			}
			if res.Drained() {
				t.Error("drained while pods were still there at the start of the pass")
			}
			if got := remaining(t, c); !slices.Equal(got, tc.wantRemaining) {
				t.Errorf("pods %v, want %v", got, tc.wantRemaining)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	cases := []struct {
		names []string
		want  string
	}{
		{nil, ""},
		{[]string{"a", "b"}, "a, b"},
		{[]string{"a", "b", "c"}, "a, b and 1 more"},
	}
	for _, tc := range cases {
		if got := summarize(tc.names, 2); got != tc.want {
			t.Errorf("summarize(%v) = %q, want %q", tc.names, got, tc.want)
		}
	}
}
