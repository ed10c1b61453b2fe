package expectedpods

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/joiner-dev/joiner/controllers/podpredicates"
)

// Kinds of workload whose missing pods are planned for.
const (
	KindReplicaSet  = "ReplicaSet"
	KindStatefulSet = "StatefulSet"
	KindJob         = "Job"
	kindDeployment  = "Deployment"
)

// RevisionAnnotationKey is the revision the Deployment controller writes on its ReplicaSets: the
// newest ReplicaSet of a Deployment has the highest.
const RevisionAnnotationKey = "deployment.kubernetes.io/revision"

// defaultMaxSurge is a rolling update's maxSurge when the Deployment does not set one.
var defaultMaxSurge = intstr.FromString("25%")

// Workloads are the owners of the pods of a round, as the cache shows them, by UID.
type Workloads struct {
	// ReplicaSets, StatefulSets and Jobs are the workloads that control pods.
	ReplicaSets  map[types.UID]*appsv1.ReplicaSet
	StatefulSets map[types.UID]*appsv1.StatefulSet
	Jobs         map[types.UID]*batchv1.Job
	// Deployments control ReplicaSets; DeploymentReplicaSets are the ReplicaSets each one
	// controls (by the Deployment's UID), old and new.
	Deployments           map[types.UID]*appsv1.Deployment
	DeploymentReplicaSets map[types.UID][]*appsv1.ReplicaSet
}

// Owner names a workload.
type Owner struct {
	// Kind is KindReplicaSet, KindStatefulSet or KindJob.
	Kind, Namespace, Name string
	// UID tells the workload from a later one of the same name.
	UID types.UID
}

// String is "Kind namespace/name", the value of podpredicates.ExpectedPodAnnotationKey.
func (o Owner) String() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// group is a workload's pods.
type group struct {
	owner Owner
	// active pods are neither terminal nor being deleted (what the workload controllers count);
	// succeeded are its Succeeded pods (a Job's completions not yet in its status).
	active, succeeded int
	// pending says whether an active pod is not bound yet.
	pending bool
	// template is the newest active pod, created at newest.
	template *corev1.Pod
	newest   time.Time
}

// Expectation is a workload with pods still to come: Missing copies of Template.
type Expectation struct {
	// Owner is the workload.
	Owner Owner
	// Missing is how many pods it is still to create.
	Missing int
	// Template is its newest active pod, which the copies are made from.
	Template *corev1.Pod
	// ClaimTemplates are a StatefulSet's volumeClaimTemplates: its new pods' claims do not exist
	// yet, so the copies use the templates instead of the template pod's own claims.
	ClaimTemplates []corev1.PersistentVolumeClaim
}

// groupPods groups the pods controlled by a ReplicaSet, StatefulSet or Job by their controller.
func groupPods(pods []corev1.Pod) map[types.UID]*group {
	groups := map[types.UID]*group{}
	for i := range pods {
		pod := &pods[i]
		ref := metav1.GetControllerOf(pod)
		if ref == nil || !supported(ref) || podpredicates.IsVirtualPod(pod) {
			continue
		}
		g := groups[ref.UID]
		if g == nil {
			g = &group{owner: Owner{Kind: ref.Kind, Namespace: pod.Namespace, Name: ref.Name, UID: ref.UID}}
			groups[ref.UID] = g
		}
		if pod.Status.Phase == corev1.PodSucceeded {
			g.succeeded++
		}
		if podpredicates.IsTerminal(pod) || pod.DeletionTimestamp != nil {
			continue
		}
		g.active++
		g.pending = g.pending || pod.Spec.NodeName == ""
		if created := pod.CreationTimestamp.Time; g.template == nil || created.After(g.newest) ||
			(created.Equal(g.newest) && pod.Name > g.template.Name) {
			g.template, g.newest = pod, created
		}
	}
	return groups
}

func supported(ref *metav1.OwnerReference) bool {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return false
	}
	group := gv.Group
	switch ref.Kind {
	case KindReplicaSet, KindStatefulSet:
		return group == appsv1.GroupName
	case KindJob:
		return group == batchv1.GroupName
	}
	return false
}

// arriving says whether the workload's pods are still being created: one of them is pending, or
// the newest was created within window. A workload whose pods stopped coming (a quota or an
// admission webhook refuses them) gets no more capacity planned for them.
func (g *group) arriving(now time.Time, window time.Duration) bool {
	return g.pending || now.Sub(g.newest) <= window
}

// expectations returns, for every arriving group whose workload the cache shows, how many pods
// it is still to create, in a stable order (namespace, name).
func expectations(groups map[types.UID]*group, w *Workloads, now time.Time, window time.Duration) []Expectation {
	var out []Expectation
	for uid, g := range groups {
		if g.template == nil || !g.arriving(now, window) {
			continue
		}
		var missing int
		var claims []corev1.PersistentVolumeClaim
		switch g.owner.Kind {
		case KindReplicaSet:
			missing = replicaSetMissing(w, w.ReplicaSets[uid], groups)
		case KindStatefulSet:
			if sts := w.StatefulSets[uid]; sts != nil && sts.DeletionTimestamp == nil {
				missing, claims = replicas(sts.Spec.Replicas)-g.active, sts.Spec.VolumeClaimTemplates
			}
		case KindJob:
			missing = jobMissing(w.Jobs[uid], g)
		}
		if missing > 0 {
			out = append(out, Expectation{Owner: g.owner, Missing: missing, Template: g.template, ClaimTemplates: claims})
		}
	}
	slices.SortFunc(out, func(a, b Expectation) int {
		return cmp.Or(cmp.Compare(a.Owner.Namespace, b.Owner.Namespace), cmp.Compare(a.Owner.Name, b.Owner.Name), cmp.Compare(a.Owner.Kind, b.Owner.Kind))
	})
	return out
}

// Expectations is what a round plans for beyond the pods that exist: for every ReplicaSet,
// StatefulSet or Job (in w) whose pods are arriving (see arriving) and number fewer than it wants,
// the pods it is still to create. pods are every pod of the cluster.
func Expectations(pods []corev1.Pod, w *Workloads, now time.Time, window time.Duration) []Expectation {
	return expectations(groupPods(pods), w, now, window)
}

// replicas is a workload's spec.replicas, one when unset as the API defaults it.
func replicas(r *int32) int {
	if r == nil {
		return 1
	}
	return int(*r)
}

// replicaSetMissing is how many pods the ReplicaSet is still to create: spec.replicas less its
// active pods; none while its pod creation fails (ReplicaFailure). For a Deployment's ReplicaSet,
// only the newest (highest revision) gets any, and no more than the Deployment's replicas plus its
// maxSurge less the active pods of all its ReplicaSets; none when the Deployment is not in the
// cache.
func replicaSetMissing(w *Workloads, rs *appsv1.ReplicaSet, groups map[types.UID]*group) int {
	if rs == nil || rs.DeletionTimestamp != nil {
		return 0
	}
	for _, c := range rs.Status.Conditions {
		if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
			return 0
		}
	}
	missing := replicas(rs.Spec.Replicas) - activeOf(groups, rs.UID)
	ref := metav1.GetControllerOf(rs)
	if ref == nil || ref.Kind != kindDeployment {
		return missing
	}
	d := w.Deployments[ref.UID]
	if d == nil || d.DeletionTimestamp != nil {
		return 0
	}
	total := 0
	for _, other := range w.DeploymentReplicaSets[d.UID] {
		if revision(other) > revision(rs) {
			return 0
		}
		total += activeOf(groups, other.UID)
	}
	return min(missing, replicas(d.Spec.Replicas)+maxSurge(d)-total)
}

func activeOf(groups map[types.UID]*group, uid types.UID) int {
	if g := groups[uid]; g != nil {
		return g.active
	}
	return 0
}

// revision is the ReplicaSet's Deployment revision, zero when unset or not a number.
func revision(rs *appsv1.ReplicaSet) int64 {
	n, err := strconv.ParseInt(rs.Annotations[RevisionAnnotationKey], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// maxSurge is how many pods a rollout of d may run above its replicas: none for Recreate.
func maxSurge(d *appsv1.Deployment) int {
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return 0
	}
	surge := &defaultMaxSurge
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil && ru.MaxSurge != nil {
		surge = ru.MaxSurge
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(surge, replicas(d.Spec.Replicas), true)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// jobMissing is how many pods the Job is still to start: spec.parallelism, bounded by
// spec.completions less the pods that succeeded, less its active pods; none for a Job that is
// suspended, finished or being deleted.
func jobMissing(job *batchv1.Job, g *group) int {
	if job == nil || job.DeletionTimestamp != nil || (job.Spec.Suspend != nil && *job.Spec.Suspend) {
		return 0
	}
	for _, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed || c.Type == batchv1.JobSuccessCriteriaMet ||
			c.Type == batchv1.JobFailureTarget) && c.Status == corev1.ConditionTrue {
			return 0
		}
	}
	want := replicas(job.Spec.Parallelism)
	if job.Spec.Completions != nil {
		want = min(want, int(*job.Spec.Completions)-max(int(job.Status.Succeeded), g.succeeded))
	}
	return want - g.active
}
