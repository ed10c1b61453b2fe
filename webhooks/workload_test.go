package webhooks_test

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/webhooks"
)

// workloadOf returns a workload of kind in namespace whose pod template is spec; the group is apps or
// batch as the kind says.
func workloadOf(kind, namespace string, spec corev1.PodSpec) (string, client.Object) {
	meta := metav1.ObjectMeta{Name: "web", Namespace: namespace}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: spec}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	switch kind {
	case "Deployment":
		return "apps", &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: kind}, ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{Selector: sel, Template: tmpl}}
	case "StatefulSet":
		return "apps", &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: kind}, ObjectMeta: meta,
			Spec: appsv1.StatefulSetSpec{Selector: sel, Template: tmpl}}
	case "DaemonSet":
		return "apps", &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: kind}, ObjectMeta: meta,
			Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}}
	case "ReplicaSet":
		return "apps", &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: kind}, ObjectMeta: meta,
			Spec: appsv1.ReplicaSetSpec{Selector: sel, Template: tmpl}}
	case "Job":
		return "batch", &batchv1.Job{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: kind}, ObjectMeta: meta,
			Spec: batchv1.JobSpec{Template: tmpl}}
	case "CronJob":
		return "batch", &batchv1.CronJob{TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: kind}, ObjectMeta: meta,
			Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}
	}
	panic("workloadOf: unknown kind " + kind)
}

func workloadRequest(kind string, op admissionv1.Operation, namespace string, spec corev1.PodSpec, old *corev1.PodSpec) admissionRequest {
	group, obj := workloadOf(kind, namespace, spec)
	var oldObj any
	if old != nil {
		_, oldObj = workloadOf(kind, namespace, *old)
	}
	req := request(kind, op, namespace, "web", obj, oldObj)
	req.Kind.Group = group
	return req
}

func onPool(name string) corev1.PodSpec {
	return corev1.PodSpec{NodeSelector: map[string]string{karpv1.NodePoolLabelKey: name}, Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}}
}

func TestValidateWorkloadTenancyPaths(t *testing.T) {
	const tail = `: NodePool team-b is not bound to namespace "team-a" (bound: team-a); use only the bound NodePools`
	tests := []struct {
		kind, path string
	}{
		{"Deployment", "spec.template"},
		{"StatefulSet", "spec.template"},
		{"DaemonSet", "spec.template"},
		{"ReplicaSet", "spec.template"},
		{"Job", "spec.template"},
		{"CronJob", "spec.jobTemplate.spec.template"},
	}
	e := newEnv(t, envOptions{objects: tenancyObjects()})
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			resp := e.handle(t, webhooks.PathValidateWorkload, workloadRequest(tt.kind, admissionv1.Create, "team-a", onPool("team-b"), nil))
			assertDecision(t, resp, false, []string{tt.path + ".spec.nodeSelector[karpenter.sh/nodepool]" + tail}, nil)
			resp = e.handle(t, webhooks.PathValidateWorkload, workloadRequest(tt.kind, admissionv1.Create, "team-a", onPool("team-a"), nil))
			assertDecision(t, resp, true, nil, nil)
		})
	}
}

func TestValidateWorkload(t *testing.T) {
	noLatest := func(workloads bool) policy.Policy {
		return policy.Policy{Name: "no-latest", Rego: regoNoLatest, Match: policy.Match{Kinds: []string{"Pod"}, WorkloadTemplates: workloads}}
	}
	latest := onPool("team-a")
	latest.Containers[0].Image = "nginx:latest"
	foreignTol := onPool("team-a")
	foreignTol.Tolerations = []corev1.Toleration{{Key: "joiner.dev/team", Operator: corev1.TolerationOpEqual, Value: "b"}}
	const latestDenial = "[no-latest] container web uses a :latest image; pin a version (field: spec.template.spec.containers[0].image)"
	tests := []struct {
		name         string
		policies     []policy.Policy
		op           admissionv1.Operation
		namespace    string
		spec         corev1.PodSpec
		old          *corev1.PodSpec
		wantAllowed  bool
		wantDenials  []string
		wantWarnings []string
	}{
		{name: "opted-in policy denies the template", policies: []policy.Policy{noLatest(true)}, spec: latest,
			wantDenials: []string{latestDenial}},
		{name: "policy not opted in leaves the Deployment alone", policies: []policy.Policy{noLatest(false)}, spec: latest, wantAllowed: true},
		{name: "toleration of another tenant's taint", spec: foreignTol, wantDenials: []string{
			`spec.template.spec.tolerations[0]: tolerates joiner.dev/team=b:NoSchedule, a taint only NodePool "team-b" carries, which is not bound to namespace "team-a"; remove the toleration`}},
		{name: "unbound namespace: tenancy does not apply", namespace: "default", spec: onPool("team-b"), wantAllowed: true},
		{name: "exempt namespace", namespace: "kube-system", spec: onPool("team-b"), wantAllowed: true},
		{name: "update that keeps an old violation only warns", policies: []policy.Policy{noLatest(true)}, op: admissionv1.Update,
			spec: latest, old: &latest, wantAllowed: true, wantWarnings: []string{"pre-existing: " + latestDenial}},
		{name: "update that brings a new violation is denied", policies: []policy.Policy{noLatest(true)}, op: admissionv1.Update,
			spec: latest, old: ptrTo(onPool("team-a")), wantDenials: []string{latestDenial}},
		{name: "update that breaks tenancy is denied", op: admissionv1.Update, spec: onPool("team-b"), old: ptrTo(onPool("team-a")),
			wantDenials: []string{`spec.template.spec.nodeSelector[karpenter.sh/nodepool]: NodePool team-b is not bound to namespace "team-a" (bound: team-a); use only the bound NodePools`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOptions{objects: tenancyObjects(), policies: tt.policies})
			op, ns := tt.op, tt.namespace
			if op == "" {
				op = admissionv1.Create
			}
			if ns == "" {
				ns = "team-a"
			}
			resp := e.handle(t, webhooks.PathValidateWorkload, workloadRequest("Deployment", op, ns, tt.spec, tt.old))
			want := tt.wantWarnings
			if resp.Allowed != tt.wantAllowed || (!tt.wantAllowed && !equalStrings([]string{message(resp)}, tt.wantDenials)) ||
				!equalStrings(resp.Warnings, want) {
				t.Fatalf("allowed %v, message %q, warnings %q; want allowed %v, denials %q, warnings %q",
					resp.Allowed, message(resp), resp.Warnings, tt.wantAllowed, tt.wantDenials, want)
			}
		})
	}
}

func TestValidateWorkloadRejectsOtherKinds(t *testing.T) {
	e := newEnv(t, envOptions{objects: tenancyObjects()})
	req := workloadRequest("Deployment", admissionv1.Create, "team-a", onPool("team-a"), nil)
	req.Kind.Group = "example.com"
	if resp := e.handle(t, webhooks.PathValidateWorkload, req); resp.Allowed || resp.Result.Code != 400 {
		t.Fatalf("a Deployment of another group: allowed %v, code %d; want a 400", resp.Allowed, resp.Result.Code)
	}
}

func ptrTo[T any](v T) *T { return &v }
