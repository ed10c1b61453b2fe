package resources

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func container(cpu, memory string) corev1.Container {
	return corev1.Container{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory),
	}}}
}

func sidecar(cpu, memory string) corev1.Container {
	c := container(cpu, memory)
	c.RestartPolicy = ptr.To(corev1.ContainerRestartPolicyAlways)
	return c
}

func TestPodRequests(t *testing.T) {
	tests := []struct {
		name     string
		spec     corev1.PodSpec
		cpuMilli int64
		memMi    int64
	}{
		{"sum of app containers", corev1.PodSpec{Containers: []corev1.Container{container("1", "1Gi"), container("500m", "512Mi")}}, 1500, 1536},
		{"init container larger than apps", corev1.PodSpec{
			InitContainers: []corev1.Container{container("3", "100Mi")},
			Containers:     []corev1.Container{container("1", "1Gi")}}, 3000, 1024},
		{"init containers run one at a time", corev1.PodSpec{
			InitContainers: []corev1.Container{container("2", "100Mi"), container("1", "4Gi")},
			Containers:     []corev1.Container{container("1", "1Gi")}}, 2000, 4096},
		{"sidecar runs beside later init containers and the apps", corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar("500m", "256Mi"), container("2", "100Mi")},
			Containers:     []corev1.Container{container("1", "1Gi")}}, 2500, 1280},
		{"pod overhead is added", corev1.PodSpec{
			Containers: []corev1.Container{container("1", "1Gi")},
			Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}, 1250, 1088},
		{"pod-level requests override the containers' sum", corev1.PodSpec{
			Resources:  podLevel("cpu", "4", "memory", "2Gi"),
			Containers: []corev1.Container{container("1", "1Gi"), container("1", "1Gi")}}, 4000, 2048},
		{"pod-level requests may be below the containers' sum", corev1.PodSpec{
			Resources:  podLevel("cpu", "1"),
			Containers: []corev1.Container{container("1", "1Gi"), container("1", "1Gi")}}, 1000, 2048},
		{"a resource without a pod-level request keeps the containers' sum", corev1.PodSpec{
			Resources:  podLevel("memory", "3Gi"),
			Containers: []corev1.Container{container("1", "1Gi"), container("500m", "1Gi")}}, 1500, 3072},
		{"pod-level requests override the init containers' peak too", corev1.PodSpec{
			Resources:      podLevel("cpu", "2", "memory", "1Gi"),
			InitContainers: []corev1.Container{container("3", "4Gi"), sidecar("500m", "256Mi")},
			Containers:     []corev1.Container{container("1", "512Mi")}}, 2000, 1024},
		{"pod overhead is added to pod-level requests", corev1.PodSpec{
			Resources:  podLevel("cpu", "2", "memory", "1Gi"),
			Containers: []corev1.Container{container("1", "1Gi")},
			Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}, 2250, 1088},
		{"pod-level limits alone change nothing", corev1.PodSpec{
			Resources:  &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}},
			Containers: []corev1.Container{container("1", "1Gi")}}, 1000, 1024},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodRequests(&corev1.Pod{Spec: tt.spec})
			if got.Core[CPU] != tt.cpuMilli || got.Core[Memory] != tt.memMi<<20 || got.Core[Pods] != 1 {
				t.Fatalf("got cpu %dm memory %dMi pods %d, want %dm %dMi 1", got.Core[CPU], got.Core[Memory]>>20, got.Core[Pods], tt.cpuMilli, tt.memMi)
			}
		})
	}
}

// podLevel returns pod-level resources (spec.resources) requesting name/quantity pairs.
func podLevel(kv ...string) *corev1.ResourceRequirements {
	r := &corev1.ResourceRequirements{Requests: corev1.ResourceList{}}
	for i := 0; i < len(kv); i += 2 {
		r.Requests[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return r
}

func TestPodLevelRequestsOfOtherResources(t *testing.T) {
	const huge = corev1.ResourceName(corev1.ResourceHugePagesPrefix + "2Mi")
	withHuge := func(q string) corev1.Container {
		c := container("1", "1Gi")
		c.Resources.Requests[huge] = resource.MustParse(q)
		return c
	}
	tests := []struct {
		name            string
		spec            corev1.PodSpec
		hugeMi, storage int64 // hugepages-2Mi and ephemeral-storage, in Mi
	}{
		{"hugepages at pod level override the containers'", corev1.PodSpec{
			Resources:  podLevel(string(huge), "64Mi"),
			Containers: []corev1.Container{withHuge("16Mi"), withHuge("16Mi")}}, 64, 0},
		{"a zero pod-level request of hugepages overrides too", corev1.PodSpec{
			Resources:  podLevel(string(huge), "0"),
			Containers: []corev1.Container{withHuge("16Mi")}}, 0, 0},
		{"ephemeral-storage is not a pod-level resource", corev1.PodSpec{
			Resources:  podLevel("ephemeral-storage", "1Gi"),
			Containers: []corev1.Container{container("1", "1Gi")}}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := PodRequests(&corev1.Pod{Spec: tt.spec})
			if h := got.Extended[huge]; h != tt.hugeMi<<20*1000 {
				t.Errorf("hugepages-2Mi %d milli-bytes, want %dMi", h, tt.hugeMi)
			}
			if s := got.Core[Storage]; s != tt.storage<<20 {
				t.Errorf("ephemeral-storage %d bytes, want %dMi", s, tt.storage)
			}
		})
	}
}
