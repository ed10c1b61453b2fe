package policy

import (
	"fmt"
	"maps"
	"strings"
)

// Workload kinds whose pod templates Pod policies with Match.WorkloadTemplates, and tenancy, also judge.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindDaemonSet   = "DaemonSet"
	KindReplicaSet  = "ReplicaSet"
	KindJob         = "Job"
	KindCronJob     = "CronJob"
)

// WorkloadKinds returns the kinds with a pod template, in documentation order.
func WorkloadKinds() []string {
	return []string{KindDeployment, KindStatefulSet, KindDaemonSet, KindReplicaSet, KindJob, KindCronJob}
}

// WorkloadGroup returns the API group of a workload kind ("apps" or "batch"), or false for other kinds.
func WorkloadGroup(kind string) (string, bool) {
	switch kind {
	case KindDeployment, KindStatefulSet, KindDaemonSet, KindReplicaSet:
		return "apps", true
	case KindJob, KindCronJob:
		return "batch", true
	}
	return "", false
}

// PodTemplatePath returns the path of the pod template in an object of a workload kind: spec.template, or
// spec.jobTemplate.spec.template for a CronJob. It returns false for kinds without a pod template.
func PodTemplatePath(kind string) ([]string, bool) {
	switch kind {
	case KindCronJob:
		return []string{"spec", "jobTemplate", "spec", "template"}, true
	case KindDeployment, KindStatefulSet, KindDaemonSet, KindReplicaSet, KindJob:
		return []string{"spec", "template"}, true
	}
	return nil, false
}

// TemplateSource says where the Pod of a template review comes from.
type TemplateSource struct {
	// Kind is the type of the workload holding the template.
	Kind GroupVersionKind
	// Path is the dotted path of the template in the workload, such as spec.template. Violation fields
	// are prefixed with it.
	Path string
}

// FieldPath returns the path in the workload of field, a path in the template's Pod: the template's path
// joined with it (spec.nodeSelector becomes spec.template.spec.nodeSelector), or the template's path
// when field is empty.
func (s TemplateSource) FieldPath(field string) string {
	if field == "" {
		return s.Path
	}
	return s.Path + "." + field
}

// PodFromTemplate returns the Pod that the pod template of obj, an object of a workload kind, describes:
// apiVersion v1, kind Pod, the template's metadata and spec, named and placed like the workload. It
// returns false when kind has no pod template or obj has none (a nil object, or no template yet); an
// error when the template is there but is not an object, naming its path. obj is not modified.
func PodFromTemplate(kind string, obj map[string]any) (map[string]any, string, bool, error) {
	path, ok := PodTemplatePath(kind)
	if !ok || obj == nil {
		return nil, "", false, nil
	}
	dotted := strings.Join(path, ".")
	var cur any = obj
	for i, key := range path {
		m, isMap := cur.(map[string]any)
		if !isMap {
			return nil, dotted, false, fmt.Errorf("%s is not an object; a %s's pod template must be at %s", strings.Join(path[:i], "."), kind, dotted)
		}
		if cur, ok = m[key]; !ok || cur == nil {
			return nil, dotted, false, nil
		}
	}
	tmpl, isMap := cur.(map[string]any)
	if !isMap {
		return nil, dotted, false, fmt.Errorf("%s is not an object; a %s's pod template must be an object with metadata and spec", dotted, kind)
	}
	meta := map[string]any{}
	if m, isMap := tmpl["metadata"].(map[string]any); isMap {
		meta = maps.Clone(m)
	}
	if wm, isMap := obj["metadata"].(map[string]any); isMap {
		for _, key := range []string{"name", "generateName", "namespace"} {
			if v, set := wm[key]; set {
				meta[key] = v
			}
		}
	}
	pod := map[string]any{"apiVersion": "v1", "kind": KindPod, "metadata": meta}
	if spec, set := tmpl["spec"]; set {
		pod["spec"] = spec
	}
	return pod, dotted, true, nil
}

// TemplateReview turns the review of a workload into the review of the Pod its template describes, which
// only the Pod policies with Match.WorkloadTemplates match; their violations' fields are prefixed with the
// template's path (see TemplateSource). It returns false when r is not about a workload kind (of its
// group: apps or batch) or the workload has no template; the error names a template that is not an object.
func TemplateReview(r Review) (Review, bool, error) {
	if group, ok := WorkloadGroup(r.Kind.Kind); !ok || group != r.Kind.Group || r.Template != nil {
		return Review{}, false, nil
	}
	pod, path, ok, err := PodFromTemplate(r.Kind.Kind, r.Object)
	if err != nil || (r.Object != nil && !ok) {
		return Review{}, false, err
	}
	oldPod, oldPath, oldOK, err := PodFromTemplate(r.Kind.Kind, r.OldObject)
	if err != nil {
		return Review{}, false, fmt.Errorf("old object: %w", err)
	}
	if !ok && !oldOK {
		return Review{}, false, nil
	}
	if path == "" {
		path = oldPath
	}
	out := r
	out.Kind = GroupVersionKind{Version: "v1", Kind: KindPod}
	out.Object, out.OldObject = pod, oldPod
	out.Template = &TemplateSource{Kind: r.Kind, Path: path}
	return out, true, nil
}
