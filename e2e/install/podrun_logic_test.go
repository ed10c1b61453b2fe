package install_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// The stand-in must build what the kubelet would: these tables pin its pure parts.

func TestExpandVars(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	for _, tc := range []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)-$(B)", "1-two"},
		{"$$(A)", "$(A)"},
		{"$(MISSING)", "$(MISSING)"},
		{"$(A", "$(A"},
		{"cost $5", "cost $5"},
	} {
		if got := expandVars(tc.in, vars); got != tc.want {
			t.Errorf("expandVars(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestResolveEnv(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "joiner-a", Namespace: "joiner-system", Labels: map[string]string{"app": "joiner"}},
		Spec: corev1.PodSpec{ServiceAccountName: "joiner"}, Status: corev1.PodStatus{PodIP: "127.0.0.1"}}
	limits := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi"), corev1.ResourceCPU: resource.MustParse("1500m")}}
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	res := func(r, divisor string) *corev1.EnvVarSource {
		s := &corev1.ResourceFieldSelector{Resource: r}
		if divisor != "" {
			s.Divisor = resource.MustParse(divisor)
		}
		return &corev1.EnvVarSource{ResourceFieldRef: s}
	}
	reader := fake.NewClientBuilder().WithObjects(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "joiner-system"},
		Data: map[string]string{"REGION": "us-east-1"}}).Build()
	for _, tc := range []struct {
		name    string
		env     []corev1.EnvVar
		want    string // NAME=value of the last variable
		wantErr string
	}{
		{name: "namespace", env: []corev1.EnvVar{{Name: "POD_NAMESPACE", ValueFrom: field("metadata.namespace")}}, want: "POD_NAMESPACE=joiner-system"},
		{name: "pod name", env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: field("metadata.name")}}, want: "POD_NAME=joiner-a"},
		{name: "label", env: []corev1.EnvVar{{Name: "APP", ValueFrom: field("metadata.labels['app']")}}, want: "APP=joiner"},
		{name: "pod IP", env: []corev1.EnvVar{{Name: "IP", ValueFrom: field("status.podIP")}}, want: "IP=127.0.0.1"},
		{name: "memory limit in bytes", env: []corev1.EnvVar{{Name: "MEM", ValueFrom: res("limits.memory", "")}}, want: "MEM=1073741824"},
		{name: "memory limit in Mi", env: []corev1.EnvVar{{Name: "MEM", ValueFrom: res("limits.memory", "1Mi")}}, want: "MEM=1024"},
		{name: "cpu limit rounded up", env: []corev1.EnvVar{{Name: "CPU", ValueFrom: res("limits.cpu", "")}}, want: "CPU=2"},
		{name: "no request set", env: []corev1.EnvVar{{Name: "CPU", ValueFrom: res("requests.cpu", "")}}, wantErr: "the container sets none"},
		{name: "ConfigMap key", env: []corev1.EnvVar{{Name: "R", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "REGION"}}}}, want: "R=us-east-1"},
		{name: "reference to an earlier variable", env: []corev1.EnvVar{{Name: "NS", ValueFrom: field("metadata.namespace")}, {Name: "URL", Value: "https://x.$(NS).svc"}},
			want: "URL=https://x.joiner-system.svc"},
		{name: "unknown field", env: []corev1.EnvVar{{Name: "X", ValueFrom: field("spec.hostname")}}, wantErr: "not a field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{Name: "controller", Env: tc.env, Resources: limits}
			got, err := resolveEnv(context.Background(), reader, pod, c)
			if !wantError(t, err, tc.wantErr) {
				return
			}
			if last := got[len(got)-1]; last.Name+"="+last.Value != tc.want {
				t.Errorf("got %s=%s, want %s", last.Name, last.Value, tc.want)
			}
		})
	}
}

func TestPodRunMapsContainerPorts(t *testing.T) {
	ports := []corev1.ContainerPort{{Name: "https-webhook", ContainerPort: 9443}, {Name: "http-metrics", ContainerPort: 8080}, {Name: "http-health", ContainerPort: 8081}}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http-health")}}}
	next := 40000
	free := func() (int, error) { next++; return next, nil }
	for _, tc := range []struct {
		name    string
		args    []string
		mounts  []corev1.VolumeMount
		want    []string
		wantErr string
		wantTmp bool
		readyOn int
	}{
		{name: "every port flag mapped to loopback",
			args:    []string{"controller", "--webhook-port=9443", "--metrics-bind-address=:8080", "--health-probe-bind-address=0.0.0.0:8081", "--reserved-enis=0"},
			mounts:  []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}},
			want:    []string{"controller", "--webhook-port=40001", "--metrics-bind-address=127.0.0.1:40002", "--health-probe-bind-address=127.0.0.1:40003", "--reserved-enis=0"},
			wantTmp: true, readyOn: 40003},
		{name: "a container port no flag names", args: []string{"controller", "--webhook-port=9443", "--metrics-bind-address=:8080"},
			wantErr: "http-health (8081) is named by no argument"},
		{name: "another volume", args: []string{"--webhook-port=9443", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081"},
			mounts: []corev1.VolumeMount{{Name: "certs", MountPath: "/certs"}}, wantErr: "teach podRun.volumes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next = 40000
			pod := &corev1.Pod{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "controller", Args: tc.args, Ports: ports, ReadinessProbe: probe, VolumeMounts: tc.mounts}},
				Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
					{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "c"}}}},
			}}
			r, err := newPodRun(context.Background(), client.Reader(nil), pod, "controller", free)
			if !wantError(t, err, tc.wantErr) {
				return
			}
			// Ports are picked in the order of the container's ports.
			if !slices.Equal(r.args, tc.want) || r.tmpMount != tc.wantTmp || r.readyPort != tc.readyOn || r.readyPath != "/readyz" {
				t.Errorf("args %v, /tmp %v, ready on %d%s; want %v, %v, %d/readyz", r.args, r.tmpMount, r.readyPort, r.readyPath, tc.want, tc.wantTmp, tc.readyOn)
			}
		})
	}
}

// wantError fails t unless err is as expected (nil when want is empty, else containing want), and
// reports whether the case goes on (no error was expected).
func wantError(t *testing.T, err error, want string) bool {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatal(err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Fatalf("err = %v, want one containing %q", err, want)
	}
	return want == ""
}
