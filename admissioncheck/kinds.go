package admissioncheck

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/joiner-dev/joiner/crdvalidation"
)

// target is what a manifest is, for the check: a kind of Joiner's CRDs, a Pod, or a Namespace (read only
// as the context of Pods).
type target struct {
	gvk        schema.GroupVersionKind
	resource   string
	namespaced bool
	crd        *crdvalidation.Kind // nil for core kinds
	// contextOnly marks kinds that are read for the other objects' sake and not judged (Namespace).
	contextOnly bool
}

func (t target) gvr() schema.GroupVersionResource {
	return t.gvk.GroupVersion().WithResource(t.resource)
}

// Core kinds joiner check knows: Pods pass Joiner's Pod webhooks; Namespaces give Pods their labels and
// NodePool binding. The apiserver's own validation of core kinds is not reproduced.
var coreKinds = map[schema.GroupVersionKind]target{
	{Version: "v1", Kind: "Pod"}:       {gvk: schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, resource: "pods", namespaced: true},
	{Version: "v1", Kind: "Namespace"}: {gvk: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, resource: "namespaces", contextOnly: true},
	// Workloads: their pod templates pass the workload webhook (tenancy and opted-in Pod policies).
	workloadGVK("apps", "Deployment"):  workloadTarget("apps", "Deployment", "deployments"),
	workloadGVK("apps", "StatefulSet"): workloadTarget("apps", "StatefulSet", "statefulsets"),
	workloadGVK("apps", "DaemonSet"):   workloadTarget("apps", "DaemonSet", "daemonsets"),
	workloadGVK("apps", "ReplicaSet"):  workloadTarget("apps", "ReplicaSet", "replicasets"),
	workloadGVK("batch", "Job"):        workloadTarget("batch", "Job", "jobs"),
	workloadGVK("batch", "CronJob"):    workloadTarget("batch", "CronJob", "cronjobs"),
}

func workloadGVK(group, kind string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}
}

func workloadTarget(group, kind, resource string) target {
	return target{gvk: workloadGVK(group, kind), resource: resource, namespaced: true}
}

// legacyVersions are the API versions Karpenter served before v1, which `joiner convert` rewrites.
var legacyVersions = map[schema.GroupVersion]string{
	{Group: "karpenter.sh", Version: "v1alpha5"}:      "is not served; run `joiner convert`",
	{Group: "karpenter.k8s.aws", Version: "v1alpha1"}: "is not served; run `joiner convert`",
	{Group: "karpenter.sh", Version: "v1beta1"}:       "is not served by this cluster's CRDs; run `joiner convert`",
	{Group: "karpenter.k8s.aws", Version: "v1beta1"}:  "is not served by this cluster's CRDs; run `joiner convert`",
}

// KindError says why a manifest's apiVersion and kind cannot be checked.
type KindError struct {
	// Message names the apiVersion and kind and the fix.
	Message string
	// Foreign is set for a kind outside Joiner's API groups, which a check skips unless
	// Options.StrictKinds.
	Foreign bool
}

// Error returns Message.
func (e *KindError) Error() string { return e.Message }

// resolve finds what obj is from its apiVersion and kind.
func resolve(schemas *crdvalidation.Schemas, obj map[string]any) (target, *KindError) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if apiVersion == "" || kind == "" {
		return target{}, &KindError{Message: "the object has no apiVersion or kind; set both, e.g. apiVersion: karpenter.sh/v1 and kind: NodePool"}
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return target{}, &KindError{Message: fmt.Sprintf("apiVersion %q is not group/version: %v", apiVersion, err)}
	}
	gvk := gv.WithKind(kind)
	if k, ok := schemas.Kind(gvk); ok {
		return target{gvk: gvk, resource: k.Resource, namespaced: k.Namespaced, crd: k}, nil
	}
	if t, ok := coreKinds[gvk]; ok {
		return t, nil
	}
	if suffix, ok := legacyVersions[gv]; ok {
		return target{}, &KindError{Message: fmt.Sprintf("%s %s %s", apiVersion, kind, suffix)}
	}
	if schemas.ServesGroup(gv.Group) {
		return target{}, &KindError{Message: fmt.Sprintf("%s %s is not served by this cluster's CRDs; the %s kinds are %s", apiVersion, kind, gv.Group, schemas.KindsOf(gv.Group))}
	}
	return target{}, &KindError{Foreign: true, Message: fmt.Sprintf("%s %s is not a kind Joiner judges; joiner check judges %s, and reads v1 Namespaces for the Pods' sake (other kinds are skipped unless --strict-kinds)",
		apiVersion, kind, knownKinds(schemas))}
}

// knownKinds lists the kinds joiner check judges, for messages.
func knownKinds(schemas *crdvalidation.Schemas) string {
	var names []string
	for _, gvk := range schemas.Kinds() {
		names = append(names, gvk.GroupVersion().String()+" "+gvk.Kind)
	}
	return strings.Join(append(names, "v1 Pod", "apps/v1 Deployment, StatefulSet, DaemonSet, ReplicaSet", "batch/v1 Job, CronJob"), ", ")
}
