package expectedpods

import (
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/joiner-dev/joiner/controllers/podpredicates"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func meta(name string, owner metav1.Object, kind, apiVersion string) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)}
	if owner != nil {
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
	}
	return m
}

func deployment(name string, replicas int32, strategy appsv1.DeploymentStrategy) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: meta(name, nil, "", ""), Spec: appsv1.DeploymentSpec{Replicas: &replicas, Strategy: strategy}}
}

func replicaSet(name string, replicas int32, d *appsv1.Deployment, revision string) *appsv1.ReplicaSet {
	rs := &appsv1.ReplicaSet{Spec: appsv1.ReplicaSetSpec{Replicas: &replicas}}
	if d != nil {
		rs.ObjectMeta = meta(name, d, "Deployment", "apps/v1")
		rs.Annotations = map[string]string{RevisionAnnotationKey: revision}
	} else {
		rs.ObjectMeta = meta(name, nil, "", "")
	}
	return rs
}

// podsOf returns n pods controlled by owner: the first pending of them unbound, the rest bound;
// each created age before now, the last the newest.
func podsOf(owner metav1.Object, kind, apiVersion string, n, pending int, age time.Duration, phase corev1.PodPhase) []corev1.Pod {
	var out []corev1.Pod
	for i := range n {
		p := corev1.Pod{ObjectMeta: meta(fmt.Sprintf("%s-%d", owner.GetName(), i), owner, kind, apiVersion), Status: corev1.PodStatus{Phase: phase}}
		p.CreationTimestamp = metav1.NewTime(now.Add(-age).Add(time.Duration(i) * time.Millisecond))
		p.Labels = map[string]string{"app": owner.GetName()}
		if i >= pending {
			p.Spec.NodeName = "node"
		}
		out = append(out, p)
	}
	return out
}

func rsPods(rs *appsv1.ReplicaSet, n, pending int) []corev1.Pod {
	return podsOf(rs, KindReplicaSet, "apps/v1", n, pending, time.Second, corev1.PodRunning)
}

func deleting(pods []corev1.Pod, n int) []corev1.Pod {
	for i := range n {
		pods[i].DeletionTimestamp = ptr.To(metav1.NewTime(now))
	}
	return pods
}

func workloads(objs ...metav1.Object) *Workloads {
	w := &Workloads{ReplicaSets: map[types.UID]*appsv1.ReplicaSet{}, StatefulSets: map[types.UID]*appsv1.StatefulSet{},
		Jobs: map[types.UID]*batchv1.Job{}, Deployments: map[types.UID]*appsv1.Deployment{}, DeploymentReplicaSets: map[types.UID][]*appsv1.ReplicaSet{}}
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.ReplicaSet:
			w.ReplicaSets[o.UID] = o
			if ref := metav1.GetControllerOf(o); ref != nil {
				w.DeploymentReplicaSets[ref.UID] = append(w.DeploymentReplicaSets[ref.UID], o)
			}
		case *appsv1.Deployment:
			w.Deployments[o.UID] = o
		case *appsv1.StatefulSet:
			w.StatefulSets[o.UID] = o
		case *batchv1.Job:
			w.Jobs[o.UID] = o
		}
	}
	return w
}

func job(parallelism int32, completions *int32, succeeded int32, mutate func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: meta("batch", nil, "", ""), Spec: batchv1.JobSpec{Parallelism: &parallelism, Completions: completions},
		Status: batchv1.JobStatus{Succeeded: succeeded}}
	if mutate != nil {
		mutate(j)
	}
	return j
}

func concat(lists ...[]corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

func TestExpectations(t *testing.T) {
	plain := replicaSet("plain", 10, nil, "")
	rolling := deployment("web", 8, appsv1.DeploymentStrategy{})
	oldRS, newRS := replicaSet("web-old", 6, rolling, "1"), replicaSet("web-new", 4, rolling, "2")
	recreate := deployment("batchy", 10, appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType})
	recreateRS := replicaSet("batchy-1", 10, recreate, "1")
	surge := deployment("surge", 10, appsv1.DeploymentStrategy{RollingUpdate: &appsv1.RollingUpdateDeployment{MaxSurge: ptr.To(intstr.FromInt32(0))}})
	surgeRS := replicaSet("surge-1", 12, surge, "1")
	failing := replicaSet("failing", 10, nil, "")
	failing.Status.Conditions = []appsv1.ReplicaSetCondition{{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue}}
	sts := &appsv1.StatefulSet{ObjectMeta: meta("db", nil, "", ""), Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](5),
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"}}}}}
	stsPods := func(n int) []corev1.Pod {
		return podsOf(sts, KindStatefulSet, "apps/v1", n, 1, time.Second, corev1.PodPending)
	}
	jobPods := func(j *batchv1.Job, active, succeeded int) []corev1.Pod {
		return concat(podsOf(j, KindJob, "batch/v1", active, 1, time.Second, corev1.PodRunning),
			podsOf(&metav1.ObjectMeta{Name: j.Name + "-done", UID: j.UID}, KindJob, "batch/v1", succeeded, 0, time.Minute, corev1.PodSucceeded))
	}
	cases := []struct {
		name string
		pods []corev1.Pod
		w    *Workloads
		want map[string]int // by owner name
	}{
		{name: "a ReplicaSet with pods still to create", pods: rsPods(plain, 3, 1), w: workloads(plain), want: map[string]int{"plain": 7}},
		{name: "pods being deleted do not count as existing", pods: deleting(rsPods(plain, 4, 1), 2), w: workloads(plain), want: map[string]int{"plain": 8}},
		{name: "a ReplicaSet whose pods stopped arriving", pods: podsOf(plain, KindReplicaSet, "apps/v1", 3, 0, time.Hour, corev1.PodRunning), w: workloads(plain), want: map[string]int{}},
		{name: "a ReplicaSet whose pods are bound but recently created", pods: rsPods(plain, 3, 0), w: workloads(plain), want: map[string]int{"plain": 7}},
		{name: "a ReplicaSet scaled down before its pods exist", pods: rsPods(replicaSet("plain", 2, nil, ""), 3, 3), w: workloads(replicaSet("plain", 2, nil, "")), want: map[string]int{}},
		{name: "a ReplicaSet with every pod", pods: rsPods(replicaSet("plain", 3, nil, ""), 3, 1), w: workloads(replicaSet("plain", 3, nil, "")), want: map[string]int{}},
		{name: "owner missing from the cache", pods: rsPods(plain, 3, 1), w: workloads(), want: map[string]int{}},
		{name: "owner replaced by another of the same name", pods: rsPods(plain, 3, 1),
			w: workloads(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: "ns", UID: "other"}, Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](10)}}), want: map[string]int{}},
		{name: "a ReplicaSet whose pod creation fails", pods: rsPods(failing, 3, 1), w: workloads(failing), want: map[string]int{}},
		{name: "Deployment rollout: only the newest ReplicaSet, capped by replicas+maxSurge", pods: concat(rsPods(oldRS, 6, 0), rsPods(newRS, 1, 1)),
			w: workloads(rolling, oldRS, newRS), want: map[string]int{"web-new": 3}}, // 8 + 25% (2) - 7 existing
		{name: "Deployment rollout: the old ReplicaSet's missing pods are not planned", pods: concat(rsPods(oldRS, 4, 1), rsPods(newRS, 4, 0)),
			w: workloads(rolling, oldRS, newRS), want: map[string]int{}},
		{name: "Deployment missing from the cache", pods: rsPods(newRS, 1, 1), w: workloads(oldRS, newRS), want: map[string]int{}},
		{name: "Recreate Deployment: no surge", pods: rsPods(recreateRS, 4, 4), w: workloads(recreate, recreateRS), want: map[string]int{"batchy-1": 6}},
		{name: "maxSurge 0 caps at the Deployment's replicas", pods: rsPods(surgeRS, 4, 4), w: workloads(surge, surgeRS), want: map[string]int{"surge-1": 6}},
		{name: "StatefulSet", pods: stsPods(2), w: workloads(sts), want: map[string]int{"db": 3}},
		{name: "StatefulSet scaled down", pods: stsPods(5), w: workloads(sts), want: map[string]int{}},
		{name: "Job: parallelism bounded by completions less succeeded", pods: jobPods(job(10, ptr.To[int32](12), 5, nil), 3, 5),
			w: workloads(job(10, ptr.To[int32](12), 5, nil)), want: map[string]int{"batch": 4}},
		{name: "Job: succeeded pods not yet in its status", pods: jobPods(job(10, ptr.To[int32](12), 5, nil), 3, 6),
			w: workloads(job(10, ptr.To[int32](12), 5, nil)), want: map[string]int{"batch": 3}},
		{name: "Job without completions: parallelism", pods: jobPods(job(10, nil, 0, nil), 3, 0), w: workloads(job(10, nil, 0, nil)), want: map[string]int{"batch": 7}},
		{name: "suspended Job", pods: jobPods(job(10, nil, 0, nil), 3, 0),
			w: workloads(job(10, nil, 0, func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })), want: map[string]int{}},
		{name: "finished Job", pods: jobPods(job(10, nil, 0, nil), 3, 0), w: workloads(job(10, nil, 0, func(j *batchv1.Job) {
			j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
		})), want: map[string]int{}},
		{name: "pods of other owners are ignored", pods: podsOf(&metav1.ObjectMeta{Name: "ds", UID: "uid-ds"}, "DaemonSet", "apps/v1", 2, 2, time.Second, corev1.PodPending),
			w: workloads(), want: map[string]int{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]int{}
			for _, e := range Expectations(tc.pods, tc.w, now, DefaultWindow) {
				got[e.Owner.Name] = e.Missing
				if e.Template == nil || e.Template.DeletionTimestamp != nil {
					t.Errorf("%s: template %v, want an active pod", e.Owner, e.Template)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("missing pods %v, want %v", got, tc.want)
			}
		})
	}
}

func TestVirtualPod(t *testing.T) {
	template := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-1", Namespace: "ns", UID: "pod-uid", Labels: map[string]string{"app": "db"},
			Annotations: map[string]string{"keep": "me"}, OwnerReferences: []metav1.OwnerReference{{Name: "db"}}},
		Spec: corev1.PodSpec{NodeName: "node-1", Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-db-1"}}},
				{Name: "shared", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "shared"}}},
			}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, NominatedNodeName: "x"},
	}
	e := &Expectation{Owner: Owner{Kind: KindStatefulSet, Namespace: "ns", Name: "db", UID: "sts-uid"}, Missing: 3, Template: template,
		ClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
			Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("fast")}}}}
	pod := VirtualPod(e, 2)
	checks := map[string]bool{
		"name":                     pod.Name == "db-expected-2",
		"uid":                      pod.UID == "expected-sts-uid-2",
		"namespace":                pod.Namespace == "ns",
		"expected":                 podpredicates.IsExpectedPod(pod) && podpredicates.IsVirtualPod(pod) && !podpredicates.IsCapacityBufferPod(pod),
		"owner annotation":         pod.Annotations[podpredicates.ExpectedPodAnnotationKey] == "StatefulSet ns/db",
		"annotations kept":         pod.Annotations["keep"] == "me",
		"labels kept":              pod.Labels["app"] == "db",
		"requests kept":            pod.Spec.Containers[0].Resources.Requests.Cpu().String() == "250m",
		"tolerations kept":         len(pod.Spec.Tolerations) == 1,
		"unbound":                  pod.Spec.NodeName == "" && pod.Status.NominatedNodeName == "",
		"pending":                  pod.Status.Phase == corev1.PodPending,
		"no owner":                 len(pod.OwnerReferences) == 0,
		"claim from its template":  pod.Spec.Volumes[0].Ephemeral != nil && *pod.Spec.Volumes[0].Ephemeral.VolumeClaimTemplate.Spec.StorageClassName == "fast",
		"other claims kept":        pod.Spec.Volumes[1].PersistentVolumeClaim != nil && pod.Spec.Volumes[1].PersistentVolumeClaim.ClaimName == "shared",
		"template untouched":       template.Spec.NodeName == "node-1" && len(template.Annotations) == 1 && template.Spec.Volumes[0].PersistentVolumeClaim != nil,
		"labels not shared":        func() bool { pod.Labels["x"] = "y"; return template.Labels["x"] == "" }(),
		"annotations not shared":   template.Annotations[podpredicates.ExpectedPodAnnotationKey] == "",
		"another copy another uid": VirtualPod(e, 1).UID != pod.UID,
	}
	for what, ok := range checks {
		if !ok {
			t.Errorf("%s: got %+v", what, pod)
		}
	}
}
