package install_test

import (
	"context"
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// imageEntrypoint is the entrypoint of the image `make image` builds (hack/image): the static
// joiner binary, which the stand-in runs from the build of this package.
const imageEntrypoint = "/joiner"

// podRun is how one pod of the chart's Deployment runs here, as the kubelet would run its
// controller container: the command line, the environment of the pod spec (downward API resolved
// against the stand-in pod), the user, and where each container port is reached.
//
// What differs from a pod, and why:
//   - every pod has its own IP, so its container ports do not collide; here the replicas share the
//     host's loopback, so each container port is mapped to a free local port (localPorts) and the
//     arguments that name a container port are rewritten to it (on 127.0.0.1);
//   - the emptyDir mounted at /tmp is a directory of its own, given as TMPDIR (a process cannot
//     mount over /tmp without a mount namespace); any other volume fails the build of the podRun,
//     so a chart that adds one is noticed;
//   - readOnlyRootFilesystem and the dropped capabilities are not enforced; runAsUser, runAsGroup
//     and fsGroup are, when the test runs as root.
type podRun struct {
	// args are the container's command line after the entrypoint, ports rewritten.
	args []string
	// env is the container's environment from the pod spec, resolved, in order.
	env []corev1.EnvVar
	// localPorts maps each container port, by name, to the local port it is reached on.
	localPorts map[string]int
	// containerPorts maps each container port name to its number in the pod spec.
	containerPorts map[string]int32
	// readyPath and readyPort are the readiness probe's HTTP GET, on a local port.
	readyPath string
	readyPort int
	// uid, gid and groups are the user the container runs as (nil: not set by the spec).
	uid, gid *int64
	groups   []int64
	// tmpMount is true when an emptyDir is mounted at /tmp.
	tmpMount bool
}

// standInPod is the pod the Deployment's template becomes under the name name: what the downward
// API reads. Its IPs are the loopback, where the stand-in serves.
func standInPod(deploy *appsv1.Deployment, name string) *corev1.Pod {
	tmpl := deploy.Spec.Template
	pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
	pod.Name, pod.Namespace = name, deploy.Namespace
	pod.UID = uuid.NewUUID()
	pod.Status.PodIP, pod.Status.HostIP = "127.0.0.1", "127.0.0.1"
	return pod
}

// newPodRun resolves the container named container of pod (from standInPod). reader reads the
// ConfigMaps and Secrets the environment refers to; freePort picks a local port.
func newPodRun(ctx context.Context, reader client.Reader, pod *corev1.Pod, container string, freePort func() (int, error)) (*podRun, error) {
	var c *corev1.Container
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == container {
			c = &pod.Spec.Containers[i]
		}
	}
	if c == nil {
		return nil, fmt.Errorf("the pod template has no container %q", container)
	}
	if len(c.Command) > 0 && (len(c.Command) != 1 || c.Command[0] != imageEntrypoint) {
		return nil, fmt.Errorf("container %s: command %v replaces the image's entrypoint %s; the stand-in runs only the joiner binary", c.Name, c.Command, imageEntrypoint)
	}
	r := &podRun{localPorts: map[string]int{}, containerPorts: map[string]int32{}}
	for _, p := range c.Ports {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		r.localPorts[p.Name], r.containerPorts[p.Name] = port, p.ContainerPort
	}
	var err error
	if r.args, err = r.rewritePorts(c.Args); err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	if r.env, err = resolveEnv(ctx, reader, pod, c); err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	if err := r.readiness(c); err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	if err := r.volumes(pod, c); err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	r.user(pod, c)
	return r, nil
}

// rewritePorts maps every argument that names a container port (--flag=N, --flag=:N or
// --flag=host:N) to the port's local port on 127.0.0.1, and fails when a container port is named
// by no argument: then the binary would not listen where the Service and the probes send traffic.
func (r *podRun) rewritePorts(args []string) ([]string, error) {
	byNumber := map[string]string{}
	for name, n := range r.containerPorts {
		byNumber[strconv.Itoa(int(n))] = name
	}
	used := map[string]bool{}
	out := make([]string, len(args))
	for i, arg := range args {
		out[i] = arg
		flag, value, ok := strings.Cut(arg, "=")
		if !ok || !strings.HasPrefix(flag, "-") {
			continue
		}
		if name, ok := byNumber[value]; ok {
			out[i], used[name] = flag+"="+strconv.Itoa(r.localPorts[name]), true
			continue
		}
		if _, port, err := net.SplitHostPort(value); err == nil {
			if name, ok := byNumber[port]; ok {
				out[i], used[name] = flag+"="+net.JoinHostPort("127.0.0.1", strconv.Itoa(r.localPorts[name])), true
			}
		}
	}
	for name, n := range r.containerPorts {
		if !used[name] {
			return nil, fmt.Errorf("container port %s (%d) is named by no argument of %v: the binary would not listen where the pod's port says", name, n, args)
		}
	}
	return out, nil
}

// readiness records the readiness probe, which must be an HTTP GET on a container port.
func (r *podRun) readiness(c *corev1.Container) error {
	p := c.ReadinessProbe
	if p == nil || p.HTTPGet == nil {
		return fmt.Errorf("no HTTP readiness probe (the stand-in waits on it as the kubelet does)")
	}
	port, err := r.localPort(p.HTTPGet.Port)
	if err != nil {
		return fmt.Errorf("readiness probe: %w", err)
	}
	r.readyPath, r.readyPort = p.HTTPGet.Path, port
	return nil
}

// localPort returns the local port of a container port given by name or number.
func (r *podRun) localPort(port intstr.IntOrString) (int, error) {
	for name, n := range r.containerPorts {
		if (port.Type == intstr.String && port.StrVal == name) || (port.Type == intstr.Int && port.IntVal == n) {
			return r.localPorts[name], nil
		}
	}
	return 0, fmt.Errorf("port %s is not a container port of the pod", port.String())
}

// volumes accepts the emptyDir at /tmp and refuses every other mount.
func (r *podRun) volumes(pod *corev1.Pod, c *corev1.Container) error {
	for _, m := range c.VolumeMounts {
		var vol *corev1.Volume
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == m.Name {
				vol = &pod.Spec.Volumes[i]
			}
		}
		switch {
		case vol == nil:
			return fmt.Errorf("volume mount %s names no volume of the pod", m.Name)
		case vol.EmptyDir != nil && m.MountPath == "/tmp":
			r.tmpMount = true
		default:
			return fmt.Errorf("volume %s mounted at %s: the stand-in reproduces only an emptyDir at /tmp; teach podRun.volumes this one", m.Name, m.MountPath)
		}
	}
	return nil
}

// user takes the user and groups from the container's security context, then the pod's.
func (r *podRun) user(pod *corev1.Pod, c *corev1.Container) {
	psc := pod.Spec.SecurityContext
	if psc != nil {
		r.uid, r.gid = psc.RunAsUser, psc.RunAsGroup
		if psc.FSGroup != nil {
			r.groups = append(r.groups, *psc.FSGroup)
		}
		r.groups = append(r.groups, psc.SupplementalGroups...)
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			r.uid = sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			r.gid = sc.RunAsGroup
		}
	}
}

// resolveEnv returns the container's environment as the kubelet builds it: envFrom first, then env
// in order, with $(VAR) references to earlier variables expanded, and valueFrom resolved against
// pod (fieldRef), the container's resources (resourceFieldRef), and the ConfigMaps and Secrets of
// the pod's namespace.
func resolveEnv(ctx context.Context, reader client.Reader, pod *corev1.Pod, c *corev1.Container) ([]corev1.EnvVar, error) {
	vars := map[string]string{}
	var out []corev1.EnvVar
	set := func(name, value string) {
		if _, ok := vars[name]; !ok {
			out = append(out, corev1.EnvVar{Name: name})
		}
		vars[name] = value
		for i := range out {
			if out[i].Name == name {
				out[i].Value = value
			}
		}
	}
	for _, from := range c.EnvFrom {
		data, err := envFromData(ctx, reader, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		value := expandVars(e.Value, vars)
		if e.ValueFrom != nil {
			var err error
			if value, err = valueFrom(ctx, reader, pod, c, e.ValueFrom); err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
		}
		set(e.Name, value)
	}
	return out, nil
}

// envFromData reads the ConfigMap or Secret of an envFrom source.
func envFromData(ctx context.Context, reader client.Reader, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm := &corev1.ConfigMap{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: from.ConfigMapRef.Name}, cm); err != nil {
			return nil, fmt.Errorf("envFrom ConfigMap %s: %w", from.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s := &corev1.Secret{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: from.SecretRef.Name}, s); err != nil {
			return nil, fmt.Errorf("envFrom Secret %s: %w", from.SecretRef.Name, err)
		}
		data := map[string]string{}
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data, nil
	}
	return nil, fmt.Errorf("envFrom %+v names neither a ConfigMap nor a Secret", from)
}

// valueFrom resolves one env valueFrom.
func valueFrom(ctx context.Context, reader client.Reader, pod *corev1.Pod, c *corev1.Container, src *corev1.EnvVarSource) (string, error) {
	switch {
	case src.FieldRef != nil:
		return fieldValue(pod, src.FieldRef.FieldPath)
	case src.ResourceFieldRef != nil:
		return resourceValue(c, src.ResourceFieldRef)
	case src.ConfigMapKeyRef != nil:
		cm := &corev1.ConfigMap{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: src.ConfigMapKeyRef.Name}, cm); err != nil {
			return "", fmt.Errorf("ConfigMap %s: %w", src.ConfigMapKeyRef.Name, err)
		}
		return cm.Data[src.ConfigMapKeyRef.Key], nil
	case src.SecretKeyRef != nil:
		s := &corev1.Secret{}
		if err := reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: src.SecretKeyRef.Name}, s); err != nil {
			return "", fmt.Errorf("Secret %s: %w", src.SecretKeyRef.Name, err)
		}
		return string(s.Data[src.SecretKeyRef.Key]), nil
	}
	return "", fmt.Errorf("valueFrom %+v: no source the stand-in knows", src)
}

// fieldValue is the downward API's value of a pod field.
func fieldValue(pod *corev1.Pod, path string) (string, error) {
	if key, ok := bracketKey(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := bracketKey(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return pod.Status.PodIP, nil
	case "status.hostIP", "status.hostIPs":
		return pod.Status.HostIP, nil
	}
	return "", fmt.Errorf("fieldRef %q: not a field the downward API serves to env", path)
}

// bracketKey parses prefix['key'].
func bracketKey(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// resourceValue is the downward API's value of a container resource: the quantity divided by
// the divisor (default 1), rounded up, as the kubelet computes it.
func resourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector) (string, error) {
	if ref.ContainerName != "" && ref.ContainerName != c.Name {
		return "", fmt.Errorf("resourceFieldRef of container %s: the stand-in resolves only the container's own", ref.ContainerName)
	}
	kind, name, ok := strings.Cut(ref.Resource, ".")
	if !ok {
		return "", fmt.Errorf("resourceFieldRef %q: want limits.<resource> or requests.<resource>", ref.Resource)
	}
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[corev1.ResourceName(name)]
	if !ok {
		// The kubelet would use the node's allocatable, which a stand-in has not got.
		return "", fmt.Errorf("resourceFieldRef %s: the container sets none (the kubelet would use the node's allocatable)", ref.Resource)
	}
	divisor := resource.MustParse("1")
	if !ref.Divisor.IsZero() {
		divisor = ref.Divisor
	}
	if name == string(corev1.ResourceCPU) {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// expandVars expands $(NAME) with vars as Kubernetes expands env values: $$ is a literal $, and a
// reference to an unknown variable stays as written.
func expandVars(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "$$"):
			b.WriteByte('$')
			i++
		case strings.HasPrefix(s[i:], "$("):
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+end+1])
			}
			i += end
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
