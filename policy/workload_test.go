package policy_test

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/policy"
)

// workload returns an object of kind (in group) whose pod template selects nodeSelector.
func workload(group, kind string, nodeSelector map[string]any) map[string]any {
	tmpl := map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
		"spec":     map[string]any{"nodeSelector": nodeSelector, "containers": []any{map[string]any{"name": "web", "image": "nginx"}}},
	}
	spec := map[string]any{"template": tmpl}
	if kind == policy.KindCronJob {
		spec = map[string]any{"schedule": "* * * * *", "jobTemplate": map[string]any{"spec": map[string]any{"template": tmpl}}}
	}
	return map[string]any{
		"apiVersion": group + "/v1", "kind": kind,
		"metadata": map[string]any{"name": "web", "namespace": "team-a", "labels": map[string]any{"tier": "front"}},
		"spec":     spec,
	}
}

func TestPodFromTemplate(t *testing.T) {
	sel := map[string]any{"disk": "ssd"}
	tests := []struct {
		name     string
		kind     string
		obj      map[string]any
		wantPath string
		wantOK   bool
		wantErr  string
	}{
		{"Deployment", "Deployment", workload("apps", "Deployment", sel), "spec.template", true, ""},
		{"StatefulSet", "StatefulSet", workload("apps", "StatefulSet", sel), "spec.template", true, ""},
		{"DaemonSet", "DaemonSet", workload("apps", "DaemonSet", sel), "spec.template", true, ""},
		{"ReplicaSet", "ReplicaSet", workload("apps", "ReplicaSet", sel), "spec.template", true, ""},
		{"Job", "Job", workload("batch", "Job", sel), "spec.template", true, ""},
		{"CronJob", "CronJob", workload("batch", "CronJob", sel), "spec.jobTemplate.spec.template", true, ""},
		{"not a workload", "Pod", map[string]any{"kind": "Pod"}, "", false, ""},
		{"nil object", "Deployment", nil, "", false, ""},
		{"no template yet", "Deployment", map[string]any{"kind": "Deployment", "spec": map[string]any{}}, "spec.template", false, ""},
		{"template not an object", "Deployment", map[string]any{"spec": map[string]any{"template": "x"}}, "spec.template", false,
			"spec.template is not an object"},
		{"jobTemplate not an object", "CronJob", map[string]any{"spec": map[string]any{"jobTemplate": []any{}}}, "spec.jobTemplate.spec.template", false,
			"spec.jobTemplate is not an object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod, path, ok, err := policy.PodFromTemplate(tt.kind, tt.obj)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || ok != tt.wantOK || path != tt.wantPath {
				t.Fatalf("PodFromTemplate = (_, %q, %v, %v), want (_, %q, %v, nil)", path, ok, err, tt.wantPath, tt.wantOK)
			}
			if !ok {
				return
			}
			want := map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": "web", "namespace": "team-a", "labels": map[string]any{"app": "web"}},
				"spec":     map[string]any{"nodeSelector": sel, "containers": []any{map[string]any{"name": "web", "image": "nginx"}}},
			}
			if !reflect.DeepEqual(pod, want) {
				t.Errorf("pod = %v, want %v", pod, want)
			}
		})
	}
}

func TestPodFromTemplateDoesNotModify(t *testing.T) {
	obj := workload("apps", "Deployment", nil)
	if _, _, _, err := policy.PodFromTemplate("Deployment", obj); err != nil {
		t.Fatal(err)
	}
	meta := obj["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
	if _, has := meta["name"]; has {
		t.Errorf("the template's metadata got a name: %v", meta)
	}
}

func TestTemplateSourceFieldPath(t *testing.T) {
	tests := []struct {
		path, field, want string
	}{
		{"spec.template", "spec.nodeSelector", "spec.template.spec.nodeSelector"},
		{"spec.template", "metadata.labels[team]", "spec.template.metadata.labels[team]"},
		{"spec.jobTemplate.spec.template", "spec.tolerations[0]", "spec.jobTemplate.spec.template.spec.tolerations[0]"},
		{"spec.template", "", "spec.template"},
	}
	for _, tt := range tests {
		if got := (policy.TemplateSource{Path: tt.path}).FieldPath(tt.field); got != tt.want {
			t.Errorf("FieldPath(%q) in %s = %q, want %q", tt.field, tt.path, got, tt.want)
		}
	}
}

// forbidSSD denies Pods selecting disk=ssd, naming spec.nodeSelector; workloads opts into templates.
func forbidSSD(name string, workloads bool) policy.Policy {
	return policy.Policy{
		Name:  name,
		Match: policy.Match{Kinds: []string{policy.KindPod}, WorkloadTemplates: workloads},
		Rego: regoFor("test.forbid_ssd",
			`violation contains {"msg": sprintf("%s %s may not select disk=ssd", [input.review.kind.kind, input.review.name]), "field": "spec.nodeSelector"} if {
	input.review.object.spec.nodeSelector.disk == "ssd"
}`),
	}
}

func TestDecideWorkloadTemplates(t *testing.T) {
	ssd := map[string]any{"disk": "ssd"}
	tests := []struct {
		name   string
		policy policy.Policy
		obj    map[string]any
		want   []string // Violation.String of the denials
	}{
		{"opted-in policy denies a Deployment's template", forbidSSD("ssd", true), workload("apps", "Deployment", ssd),
			[]string{"[ssd] Pod web may not select disk=ssd (field: spec.template.spec.nodeSelector)"}},
		{"opted-in policy denies a CronJob's template", forbidSSD("ssd", true), workload("batch", "CronJob", ssd),
			[]string{"[ssd] Pod web may not select disk=ssd (field: spec.jobTemplate.spec.template.spec.nodeSelector)"}},
		{"opted-in policy admits a complying Job", forbidSSD("ssd", true), workload("batch", "Job", map[string]any{"disk": "hdd"}), nil},
		{"policy not opted in leaves a Deployment alone", forbidSSD("ssd", false), workload("apps", "Deployment", ssd), nil},
		{"a kind named Deployment in another group is no workload", forbidSSD("ssd", true),
			func() map[string]any {
				o := workload("apps", "Deployment", ssd)
				o["apiVersion"] = "example.com/v1"
				return o
			}(), nil},
		{"the Pod itself is judged either way", forbidSSD("ssd", false),
			map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p"}, "spec": map[string]any{"nodeSelector": ssd}},
			[]string{"[ssd] Pod p may not select disk=ssd (field: spec.nodeSelector)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustEngine(t, policy.Options{}, tt.policy)
			r, err := policy.BuildReview(policy.ReviewInput{Operation: policy.OperationCreate, Object: tt.obj})
			if err != nil {
				t.Fatal(err)
			}
			v, err := e.Decide(context.Background(), r)
			if err != nil {
				t.Fatal(err)
			}
			if got := policy.Messages(v.Denials()); !reflect.DeepEqual(got, tt.want) && (len(got) > 0 || len(tt.want) > 0) {
				t.Errorf("denials = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDecideBrokenTemplateIsAnError(t *testing.T) {
	e := mustEngine(t, policy.Options{}, forbidSSD("ssd", true))
	obj := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"template": []any{}}}
	r, err := policy.BuildReview(policy.ReviewInput{Operation: policy.OperationCreate, Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Decide(context.Background(), r); err == nil || !strings.Contains(err.Error(), "spec.template is not an object") {
		t.Errorf("Decide err = %v, want one naming spec.template", err)
	}
}

func TestWorkloadTemplatesNeedPod(t *testing.T) {
	p := forbidSSD("ssd", true)
	p.Match.Kinds = []string{policy.KindNodePool}
	err := policy.Validate(p)
	if err == nil || !strings.Contains(err.Error(), "spec.match.workloadTemplates") {
		t.Errorf("Validate = %v, want an error naming spec.match.workloadTemplates", err)
	}
	p.Match.Kinds = []string{policy.KindPod}
	if err := policy.Validate(p); err != nil {
		t.Errorf("Validate with Pod in kinds = %v, want nil", err)
	}
}
