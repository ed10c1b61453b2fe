package config_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// seed001Values is a Karpenter v1 values file as a team installs Karpenter with on EKS (the IRSA role
// on the ServiceAccount, the cluster and its interruption queue, controller resources).
const seed001Values = `
settings:
  clusterName: prod-east
  interruptionQueue: prod-east
serviceAccount:
  annotations:
    eks.amazonaws.com/role-arn: arn:aws:iam::111122223333:role/KarpenterControllerRole-prod-east
controller:
  resources:
    requests:
      cpu: "1"
      memory: 1Gi
    limits:
      cpu: "1"
      memory: 1Gi
`

// seed003LegacyValues is a values file of Karpenter's pre-v0.19 layout, as older installs still carry.
const seed003LegacyValues = `
clusterName: prod-east
clusterEndpoint: https://ABCDEF0123456789.gr7.us-east-1.eks.amazonaws.com
aws:
  defaultInstanceProfile: KarpenterNodeInstanceProfile-prod-east
`

// tryHelmValues renders the chart with a values file holding valuesYAML, then the extra flags; no
// provider is chosen for it.
func tryHelmValues(t *testing.T, valuesYAML string, extra ...string) ([]byte, string, error) {
	t.Helper()
	// Not t.TempDir(): its path holds the test's name, and helm splits -f at commas.
	dir, err := os.MkdirTemp("", "joiner-values-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	f := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(f, []byte(valuesYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	return tryHelmTemplate(t, defaultNamespace, append([]string{"-f", f}, extra...)...)
}

// helmValues is tryHelmValues that must succeed.
func helmValues(t *testing.T, valuesYAML string, extra ...string) manifest {
	t.Helper()
	out, stderr, err := tryHelmValues(t, valuesYAML, extra...)
	if err != nil {
		t.Fatalf("helm template with values\n%s\nfailed: %v\n%s", valuesYAML, err, stderr)
	}
	return parse(t, out)
}

// controllerPod is the rendered controller Deployment with its container's flags and environment.
type controllerPod struct {
	deployment appsv1.Deployment
	container  corev1.Container
	// flags maps each --flag of the container's args to its value.
	flags map[string]string
	// env maps each plain-valued environment variable to its value.
	env map[string]string
}

func controllerOf(t *testing.T, m manifest) controllerPod {
	t.Helper()
	var p controllerPod
	decode(t, m.get(t, "Deployment", deploymentName), &p.deployment)
	cs := p.deployment.Spec.Template.Spec.Containers
	if len(cs) == 0 || len(cs[0].Args) == 0 || cs[0].Args[0] != "controller" {
		t.Fatalf("the first container does not run `joiner controller`: %+v", cs)
	}
	p.container = cs[0]
	p.flags, p.env = map[string]string{}, map[string]string{}
	for _, a := range p.container.Args[1:] {
		k, v, _ := strings.Cut(a, "=")
		p.flags[k] = v
	}
	for _, e := range p.container.Env {
		if e.ValueFrom == nil {
			p.env[e.Name] = e.Value
		}
	}
	return p
}

// TestHelmInstallsWithKarpenterValues: a Karpenter values file installs Joiner on AWS as it would
// have installed Karpenter, and the rendering keeps every property of the default install.
func TestHelmInstallsWithKarpenterValues(t *testing.T) {
	m := helmValues(t, seed001Values)
	w := defaults()
	w.clusterArg = "prod-east"
	checkCommon(t, m, w)

	p := controllerOf(t, m)
	for flag, want := range map[string]string{"--cloud-provider": "aws", "--cluster-name": "prod-east", "--interruption-queue": "prod-east"} {
		if got, ok := p.flags[flag]; !ok || got != want {
			t.Errorf("%s = %q (present %v), want %q; args %v", flag, got, ok, want, p.container.Args)
		}
	}
	var sa corev1.ServiceAccount
	decode(t, m.get(t, "ServiceAccount", "joiner"), &sa)
	if got := sa.Annotations["eks.amazonaws.com/role-arn"]; got != "arn:aws:iam::111122223333:role/KarpenterControllerRole-prod-east" {
		t.Errorf("ServiceAccount annotation eks.amazonaws.com/role-arn = %q, want the IRSA role of the values", got)
	}
	want := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	if got := p.container.Resources; !equalResources(got, want) {
		t.Errorf("controller resources = %v, want the values' %v", got, want)
	}
}

func equalResources(a, b corev1.ResourceRequirements) bool {
	eq := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return eq(a.Requests, b.Requests) && eq(a.Limits, b.Limits)
}

// TestHelmChoosesTheProvider: the provider is AWS unless the local simulator is asked for, and AWS
// without a cluster name fails at render time.
func TestHelmChoosesTheProvider(t *testing.T) {
	tests := []struct {
		name, values string
		wantProvider string
		wantCluster  string // "" means no --cluster-name
		wantErr      string
	}{
		{name: "cluster name, as Karpenter's chart", values: "settings: {clusterName: prod}", wantProvider: "aws", wantCluster: "prod"},
		{name: "cluster name rendered with tpl", values: `settings: {clusterName: "{{ .Release.Namespace }}-cluster"}`,
			wantProvider: "aws", wantCluster: "joiner-system-cluster"},
		{name: "aws chosen explicitly", values: "settings: {cloudProvider: aws, clusterName: prod}", wantProvider: "aws", wantCluster: "prod"},
		{name: "local chosen", values: "settings: {cloudProvider: local}", wantProvider: "local"},
		{name: "local chosen, with a cluster name", values: "settings: {cloudProvider: local, clusterName: dev}", wantProvider: "local", wantCluster: "dev"},
		{name: "neither a cluster name nor local", values: "{}", wantErr: "settings.clusterName is required"},
		{name: "aws without a cluster name", values: "settings: {cloudProvider: aws}", wantErr: "settings.clusterName is required"},
		{name: "an unknown provider", values: "settings: {cloudProvider: gcp, clusterName: prod}", wantErr: "cloudProvider"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.wantErr != "" {
				expectRenderError(t, tt.values, tt.wantErr)
				return
			}
			p := controllerOf(t, helmValues(t, tt.values))
			if got := p.flags["--cloud-provider"]; got != tt.wantProvider {
				t.Errorf("--cloud-provider = %q, want %q", got, tt.wantProvider)
			}
			if got, ok := p.flags["--cluster-name"]; got != tt.wantCluster || ok != (tt.wantCluster != "") {
				t.Errorf("--cluster-name = %q (present %v), want %q", got, ok, tt.wantCluster)
			}
			// The AWS-only flags appear exactly when the provider is aws.
			for _, f := range []string{"--vm-memory-overhead-percent", "--reserved-enis"} {
				if _, ok := p.flags[f]; ok != (tt.wantProvider == "aws") {
					t.Errorf("%s present: %v, want %v with --cloud-provider=%s", f, ok, !ok, tt.wantProvider)
				}
			}
		})
	}
}

// expectRenderError asserts that rendering values fails and that the error output says each of want.
func expectRenderError(t *testing.T, values string, want ...string) {
	t.Helper()
	out, stderr, err := tryHelmValues(t, values)
	if err == nil {
		t.Fatalf("helm template succeeded with values\n%s\nwant a failure saying %q; rendered %d bytes", values, want, len(out))
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("helm template failed with\n%s\nwant it to say %q", stderr, w)
		}
	}
}

// TestHelmRejectsLegacyAndUnknownValues: a key of an older Karpenter layout fails naming its v1
// replacement, and values.schema.json rejects a key it does not know, naming it.
func TestHelmRejectsLegacyAndUnknownValues(t *testing.T) {
	tests := []struct {
		name, values string
		want         []string
	}{
		{"legacy values of seed 003", seed003LegacyValues, []string{
			"clusterName was removed: set settings.clusterName",
			"clusterEndpoint was removed: set settings.clusterEndpoint",
			"aws.defaultInstanceProfile was removed: set spec.role"}},
		{"legacy values with the v1 cluster name too", "settings: {clusterName: prod}\n" + seed003LegacyValues,
			[]string{"set settings.clusterName", "set settings.clusterEndpoint"}},
		{"settings.aws of v0.19 to v0.31", `
settings:
  aws:
    clusterName: prod
    defaultInstanceProfile: KarpenterNodeInstanceProfile-prod
    interruptionQueueName: prod`, []string{
			"settings.aws.clusterName was removed: set settings.clusterName",
			"settings.aws.defaultInstanceProfile was removed: set spec.role",
			"settings.aws.interruptionQueueName was removed: set settings.interruptionQueue"}},
		{"settings.aws with an unlisted key", "settings: {clusterName: prod, aws: {enableSomething: true}}",
			[]string{"settings.aws.* was removed", "settings.clusterName"}},
		{"controller.clusterName of v0.5", "controller: {clusterName: prod}", []string{"controller.clusterName was removed: set settings.clusterName"}},
		{"the drift gate of v0.3x", "settings: {clusterName: prod, featureGates: {drift: true}}", []string{"settings.featureGates.drift was removed"}},
		{"logConfig", "settings: {clusterName: prod}\nlogConfig: {enabled: true}", []string{"logConfig was removed: set logLevel"}},
		{"Joiner's former metrics.port", "settings: {clusterName: prod}\nmetrics: {port: 9090}", []string{"set controller.metrics.port"}},
		{"nameOverride", "settings: {clusterName: prod}\nnameOverride: karpenter", []string{"nameOverride is not supported"}},
		{"unknown top-level key", "settings: {clusterName: prod}\ncontroler: {}", []string{"'controler' not allowed"}},
		{"unknown setting", "settings: {clusterName: prod, batchMaxDurations: 10s}", []string{"'batchMaxDurations' not allowed"}},
		{"unknown feature gate", "settings: {clusterName: prod, featureGates: {spotToSpot: true}}", []string{"'spotToSpot' not allowed"}},
		{"unknown serviceAccount key", "settings: {clusterName: prod}\nserviceAccount: {annotation: {}}", []string{"'annotation' not allowed"}},
		{"unknown serviceMonitor key", "settings: {clusterName: prod}\nserviceMonitor: {enable: true}", []string{"'enable' not allowed"}},
		{"unknown controller key", "settings: {clusterName: prod}\ncontroller: {resource: {}}", []string{"'resource' not allowed"}},
		{"unknown image key", "settings: {clusterName: prod}\ncontroller: {image: {registry: x}}", []string{"'registry' not allowed"}},
		{"a fraction out of range", "settings: {clusterName: prod, vmMemoryOverheadPercent: 7.5}", []string{"vmMemoryOverheadPercent"}},
		{"a duration that is not one", "settings: {clusterName: prod, batchMaxDuration: ten seconds}", []string{"batchMaxDuration"}},
		{"a policy Karpenter does not have", "settings: {clusterName: prod, preferencePolicy: respect}", []string{"preferencePolicy"}},
		{"a log level Karpenter does not have", "settings: {clusterName: prod}\nlogLevel: verbose", []string{"logLevel"}},
		{"a gate that is not a boolean", "settings: {clusterName: prod, featureGates: {nodeRepair: enabled}}", []string{"nodeRepair"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { expectRenderError(t, tt.values, tt.want...) })
	}
}

// TestHelmKarpenterPodValues: each of Karpenter's pod-level values reaches the object it configures.
// path is a JSON pointer into the object (RFC 6901: "/" separates, "~1" is a slash in a key).
func TestHelmKarpenterPodValues(t *testing.T) {
	const pod = "/spec/template/spec"
	tests := []struct {
		name, values string
		kind, obj    string
		path         string
		want         string // JSON
	}{
		{"replicas", "replicas: 3", "Deployment", "joiner", "/spec/replicas", `3`},
		{"revisionHistoryLimit", "revisionHistoryLimit: 10", "Deployment", "joiner", "/spec/revisionHistoryLimit", `10`},
		{"strategy", "strategy: {rollingUpdate: {maxSurge: 2}}", "Deployment", "joiner", "/spec/strategy/rollingUpdate/maxSurge", `2`},
		{"podSecurityContext", "podSecurityContext: {fsGroup: 1000}", "Deployment", "joiner", pod + "/securityContext/fsGroup", `1000`},
		{"priorityClassName", "priorityClassName: platform-critical", "Deployment", "joiner", pod + "/priorityClassName", `"platform-critical"`},
		{"terminationGracePeriodSeconds", "terminationGracePeriodSeconds: 60", "Deployment", "joiner", pod + "/terminationGracePeriodSeconds", `60`},
		{"hostNetwork", "hostNetwork: true", "Deployment", "joiner", pod + "/hostNetwork", `true`},
		{"dnsPolicy", "dnsPolicy: ClusterFirstWithHostNet", "Deployment", "joiner", pod + "/dnsPolicy", `"ClusterFirstWithHostNet"`},
		{"dnsConfig", "dnsConfig: {options: [{name: ndots, value: '1'}]}", "Deployment", "joiner", pod + "/dnsConfig/options/0/name", `"ndots"`},
		{"schedulerName", "schedulerName: custom", "Deployment", "joiner", pod + "/schedulerName", `"custom"`},
		{"nodeSelector", "nodeSelector: {role: system}", "Deployment", "joiner", pod + "/nodeSelector/role", `"system"`},
		{"tolerations", "tolerations: [{key: system, operator: Exists}]", "Deployment", "joiner", pod + "/tolerations/0/key", `"system"`},
		{"affinity", "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: role, operator: In, values: [system]}]}]}}}",
			"Deployment", "joiner", pod + "/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchExpressions/0/key", `"role"`},
		{"pod anti-affinity terms get the selector, as Karpenter's", "affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname}]}}",
			"Deployment", "joiner", pod + "/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution/0/labelSelector/matchLabels/app.kubernetes.io~1name", `"joiner"`},
		{"topologySpreadConstraints get the selector", "topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule}]",
			"Deployment", "joiner", pod + "/topologySpreadConstraints/0/labelSelector/matchLabels/app.kubernetes.io~1component", `"controller"`},
		{"extraVolumes", "extraVolumes: [{name: token, emptyDir: {}}]", "Deployment", "joiner", pod + "/volumes/1/name", `"token"`},
		{"initContainers", "initContainers: [{name: init, image: busybox}]", "Deployment", "joiner", pod + "/initContainers/0/name", `"init"`},
		{"podLabels", "podLabels: {team: platform}", "Deployment", "joiner", "/spec/template/metadata/labels/team", `"platform"`},
		{"podAnnotations", "podAnnotations: {a: b}", "Deployment", "joiner", "/spec/template/metadata/annotations/a", `"b"`},
		{"imagePullPolicy", "imagePullPolicy: Always", "Deployment", "joiner", pod + "/containers/0/imagePullPolicy", `"Always"`},
		{"controller.containerName", "controller: {containerName: karpenter}", "Deployment", "joiner", pod + "/containers/0/name", `"karpenter"`},
		{"controller.env", "controller: {env: [{name: AWS_REGION, value: eu-west-1}]}", "Deployment", "joiner", pod + "/containers/0/env/2/value", `"eu-west-1"`},
		{"controller.envFrom", "controller: {envFrom: [{configMapRef: {name: extra}}]}", "Deployment", "joiner", pod + "/containers/0/envFrom/0/configMapRef/name", `"extra"`},
		{"controller.extraVolumeMounts", "controller: {extraVolumeMounts: [{name: token, mountPath: /token}]}", "Deployment", "joiner", pod + "/containers/0/volumeMounts/1/mountPath", `"/token"`},
		{"controller.securityContext", "controller: {securityContext: {appArmorProfile: {type: RuntimeDefault}}}", "Deployment", "joiner", pod + "/containers/0/securityContext/appArmorProfile/type", `"RuntimeDefault"`},
		{"controller.securityContext keeps the restricted fields", "controller: {securityContext: {seccompProfile: {type: Localhost, localhostProfile: p.json}}}",
			"Deployment", "joiner", pod + "/containers/0/securityContext/readOnlyRootFilesystem", `true`},
		{"controller.sidecarContainer gets the extra and sidecar mounts",
			"controller: {extraVolumeMounts: [{name: a, mountPath: /a}], sidecarVolumeMounts: [{name: b, mountPath: /b}], sidecarContainer: [{name: proxy, image: proxy}]}",
			"Deployment", "joiner", pod + "/containers/1/volumeMounts", `[{"name":"a","mountPath":"/a"},{"name":"b","mountPath":"/b"}]`},
		{"controller.metrics.port: container", "controller: {metrics: {port: 9000}}", "Deployment", "joiner", pod + "/containers/0/ports/1/containerPort", `9000`},
		{"controller.metrics.port: Service", "controller: {metrics: {port: 9000}}", "Service", metricsService, "/spec/ports/0/port", `9000`},
		{"controller.healthProbe.port", "controller: {healthProbe: {port: 9001}}", "Deployment", "joiner", pod + "/containers/0/ports/2/containerPort", `9001`},
		{"serviceAccount.name", "serviceAccount: {name: karpenter}", "Deployment", "joiner", pod + "/serviceAccountName", `"karpenter"`},
		{"serviceAccount.name empty, as Karpenter's default", `serviceAccount: {name: ""}`, "Deployment", "joiner", pod + "/serviceAccountName", `"joiner"`},
		{"serviceAccount.create", "serviceAccount: {create: true, annotations: {a: b}}", "ServiceAccount", "joiner", "/metadata/annotations/a", `"b"`},
		{"service.annotations", "service: {annotations: {a: b}}", "Service", metricsService, "/metadata/annotations/a", `"b"`},
		{"additionalLabels", "additionalLabels: {team: platform}", "ClusterRole", "joiner", "/metadata/labels/team", `"platform"`},
		{"additionalAnnotations", "additionalAnnotations: {owner: platform}", "Deployment", "joiner", "/metadata/annotations/owner", `"platform"`},
		{"additionalAnnotations on webhooks", "additionalAnnotations: {owner: platform}", "ValidatingWebhookConfiguration", validating, "/metadata/annotations/owner", `"platform"`},
		{"additionalClusterRoleRules", "additionalClusterRoleRules: [{apiGroups: [''], resources: [configmaps], verbs: [get]}]",
			"ClusterRole", "joiner", "/rules", ""},
		{"podDisruptionBudget.maxUnavailable", "podDisruptionBudget: {name: karpenter, maxUnavailable: 1}", "PodDisruptionBudget", "karpenter", "/spec/maxUnavailable", `1`},
		{"serviceMonitor", "serviceMonitor: {enabled: true, additionalLabels: {release: prom}, endpointConfig: {interval: 30s}}",
			"ServiceMonitor", "joiner", "/spec/endpoints/0", `{"port":"http-metrics","path":"/metrics","interval":"30s"}`},
		{"serviceMonitor labels", "serviceMonitor: {enabled: true, additionalLabels: {release: prom}}", "ServiceMonitor", "joiner", "/metadata/labels/release", `"prom"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := helmValues(t, tt.values, prodCluster...)
			got, ok := jsonPointer(m.get(t, tt.kind, tt.obj).Fields, tt.path)
			if !ok {
				t.Fatalf("%s %s has nothing at %s", tt.kind, tt.obj, tt.path)
			}
			if tt.want == "" { // additionalClusterRoleRules: the last rule is the one added
				rules := got.([]any)
				got, tt.want = rules[len(rules)-1], `{"apiGroups":[""],"resources":["configmaps"],"verbs":["get"]}`
			}
			var want any
			if err := json.Unmarshal([]byte(tt.want), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s %s = %s, want %s", tt.kind, tt.obj, tt.path, js(got), tt.want)
			}
		})
	}
}

// jsonPointer resolves an RFC 6901 pointer in a decoded JSON value.
func jsonPointer(v any, pointer string) (any, bool) {
	for _, tok := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch cur := v.(type) {
		case map[string]any:
			next, ok := cur[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(cur) {
				return nil, false
			}
			v = cur[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// TestHelmPDBRenderings: the PodDisruptionBudget in Karpenter's form (maxUnavailable) and Joiner's
// (minAvailable, left out while it would block drains).
func TestHelmPDBRenderings(t *testing.T) {
	tests := []struct {
		values  string
		wantPDB string // "" means none; else the spec field that is set
	}{
		{"replicas: 1", ""},
		{"replicas: 2", "minAvailable"},
		{"replicas: 1\npodDisruptionBudget: {maxUnavailable: 1}", "maxUnavailable"},
		{"podDisruptionBudget: {enabled: false}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.values, func(t *testing.T) {
			m := helmValues(t, tt.values, prodCluster...)
			pdbs := m.ofKind("PodDisruptionBudget")
			if tt.wantPDB == "" {
				if len(pdbs) != 0 {
					t.Errorf("rendered %d PodDisruptionBudgets, want none", len(pdbs))
				}
				return
			}
			if len(pdbs) != 1 {
				t.Fatalf("rendered %d PodDisruptionBudgets, want one", len(pdbs))
			}
			spec, _ := pdbs[0].Fields["spec"].(map[string]any)
			for _, f := range []string{"minAvailable", "maxUnavailable"} {
				if _, ok := spec[f]; ok != (f == tt.wantPDB) {
					t.Errorf("spec.%s present: %v; want only %s (spec %s)", f, ok, tt.wantPDB, js(spec))
				}
			}
		})
	}
}

// TestHelmInstallsWithKarpenterDefaultValues: a values file with every key of Karpenter v1.14's
// chart at its default renders, and its settings reach the controller as Karpenter would pass them.
func TestHelmInstallsWithKarpenterDefaultValues(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "karpenter-v1.14-values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := helmValues(t, string(raw))
	p := controllerOf(t, m)
	wantFlags := map[string]string{"--cloud-provider": "aws", "--cluster-name": "prod-east", "--reserved-enis": "0", "--spot-to-spot-consolidation": "false"}
	for k, want := range wantFlags {
		if got := p.flags[k]; got != want {
			t.Errorf("flag %s = %q, want %q", k, got, want)
		}
	}
	wantEnv := map[string]string{
		"BATCH_MAX_DURATION": "10s", "BATCH_IDLE_DURATION": "1s", "PREFERENCE_POLICY": "Respect", "MIN_VALUES_POLICY": "Strict",
		"IGNORE_DRA_REQUESTS": "true", "LOG_OUTPUT_PATHS": "stdout", "LOG_ERROR_OUTPUT_PATHS": "stderr",
		"FEATURE_GATES": "NodeRepair=false,ReservedCapacity=true,SpotToSpotConsolidation=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false",
	}
	for k, want := range wantEnv {
		if got := p.env[k]; got != want {
			t.Errorf("env %s = %q, want %q", k, got, want)
		}
	}
	if got := p.deployment.Spec.Template.Spec.ServiceAccountName; got != "joiner" {
		t.Errorf("serviceAccountName = %q, want joiner (Karpenter's empty name falls back to the chart's)", got)
	}
	if !m.has("PodDisruptionBudget", "karpenter") {
		t.Error("no PodDisruptionBudget named karpenter (podDisruptionBudget.name)")
	}
}
