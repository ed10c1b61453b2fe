package aws

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/mail"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// mimeBoundary separates the parts of the MIME user data the provider writes.
const mimeBoundary = "//"

// bootstrap is what a node needs to join the cluster, and how its kubelet is set up.
type bootstrap struct {
	ClusterName string
	// Endpoint is the API server URL; CABundle its certificate authority, base64-encoded PEM.
	Endpoint, CABundle string
	// ServiceCIDR is the cluster's service IPv4 CIDR (nodeadm needs it).
	ServiceCIDR string
	Kubelet     *awsv1.KubeletConfiguration
	// Labels and Taints are registered with the node.
	Labels map[string]string
	Taints []corev1.Taint
	// InstanceStorePolicy RAID0 puts the kubelet's state on the instance store.
	InstanceStorePolicy *awsv1.InstanceStorePolicy
	// UserData is the EC2NodeClass's spec.userData.
	UserData *string
}

// renderUserData returns the user data (not yet base64-encoded) of a node of the AMI family:
// a nodeadm NodeConfig in a MIME document for AL2023, a bootstrap.sh script in a MIME document
// for AL2, TOML settings for Bottlerocket (each merged with spec.userData), and spec.userData
// unchanged for Custom.
func renderUserData(family string, b bootstrap) (string, error) {
	switch family {
	case awsv1.AMIFamilyAL2023:
		return al2023UserData(b)
	case awsv1.AMIFamilyAL2:
		return al2UserData(b)
	case awsv1.AMIFamilyBottlerocket:
		return bottlerocketUserData(b)
	case awsv1.AMIFamilyCustom:
		if b.UserData == nil {
			return "", nil
		}
		return *b.UserData, nil
	}
	return "", fmt.Errorf("AMI family %s is not supported by this provider yet; use AL2023, AL2, Bottlerocket or Custom", family)
}

// mimePart is one part of a MIME multipart document.
type mimePart struct {
	ContentType string
	Body        string
}

// splitUserData returns the parts of the user's user data: the parts of a MIME multipart
// document, or the whole text as one part of the given content type.
func splitUserData(userData *string, defaultType string) ([]mimePart, error) {
	if userData == nil || strings.TrimSpace(*userData) == "" {
		return nil, nil
	}
	text := *userData
	msg, err := mail.ReadMessage(strings.NewReader(text))
	if err == nil {
		mediaType, params, perr := mime.ParseMediaType(msg.Header.Get("Content-Type"))
		if perr == nil && strings.HasPrefix(mediaType, "multipart/") {
			r := multipart.NewReader(msg.Body, params["boundary"])
			var parts []mimePart
			for {
				p, err := r.NextPart()
				if err == io.EOF {
					return parts, nil
				}
				if err != nil {
					return nil, fmt.Errorf("spec.userData: read MIME part: %w", err)
				}
				body, err := io.ReadAll(p)
				if err != nil {
					return nil, fmt.Errorf("spec.userData: read MIME part: %w", err)
				}
				ct := p.Header.Get("Content-Type")
				if ct == "" {
					ct = "text/x-shellscript"
				}
				parts = append(parts, mimePart{ContentType: ct, Body: string(body)})
			}
		}
	}
	return []mimePart{{ContentType: defaultType, Body: text}}, nil
}

// joinMIME writes a MIME multipart document of the parts.
func joinMIME(parts []mimePart) string {
	var b strings.Builder
	b.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"" + mimeBoundary + "\"\n\n")
	for _, p := range parts {
		b.WriteString("--" + mimeBoundary + "\nContent-Type: " + p.ContentType + "\n\n")
		b.WriteString(strings.TrimRight(p.Body, "\n") + "\n\n")
	}
	b.WriteString("--" + mimeBoundary + "--\n")
	return b.String()
}

// nodeConfigContentType is the MIME type nodeadm reads NodeConfig documents from.
const nodeConfigContentType = "application/node.eks.aws"

// al2023UserData writes a MIME document whose first part is the provider's NodeConfig and whose
// further parts are the user's (a NodeConfig, a script, or the parts of a MIME document), which
// nodeadm merges over it.
func al2023UserData(b bootstrap) (string, error) {
	defaultType := "text/x-shellscript"
	if b.UserData != nil && strings.Contains(*b.UserData, "node.eks.aws/") {
		defaultType = nodeConfigContentType
	}
	user, err := splitUserData(b.UserData, defaultType)
	if err != nil {
		return "", err
	}
	config := map[string]any{}
	if k := b.Kubelet; k != nil {
		putIf(config, "maxPods", k.MaxPods)
		putIf(config, "podsPerCore", k.PodsPerCore)
		if len(k.ClusterDNS) > 0 {
			config["clusterDNS"] = k.ClusterDNS
		}
		putMap(config, "systemReserved", k.SystemReserved)
		putMap(config, "kubeReserved", k.KubeReserved)
		putMap(config, "evictionHard", k.EvictionHard)
		putMap(config, "evictionSoft", k.EvictionSoft)
		if len(k.EvictionSoftGracePeriod) > 0 {
			m := map[string]string{}
			for s, d := range k.EvictionSoftGracePeriod {
				m[s] = d.Duration.String()
			}
			config["evictionSoftGracePeriod"] = m
		}
		putIf(config, "evictionMaxPodGracePeriod", k.EvictionMaxPodGracePeriod)
		putIf(config, "imageGCHighThresholdPercent", k.ImageGCHighThresholdPercent)
		putIf(config, "imageGCLowThresholdPercent", k.ImageGCLowThresholdPercent)
		putIf(config, "cpuCFSQuota", k.CPUCFSQuota)
	}
	kubelet := map[string]any{}
	if len(config) > 0 {
		kubelet["config"] = config
	}
	var flags []string
	if l := nodeLabels(b.Labels); l != "" {
		flags = append(flags, "--node-labels="+l)
	}
	if t := taintList(b.Taints); t != "" {
		flags = append(flags, "--register-with-taints="+t)
	}
	if len(flags) > 0 {
		kubelet["flags"] = flags
	}
	cluster := map[string]any{"name": b.ClusterName, "apiServerEndpoint": b.Endpoint, "certificateAuthority": b.CABundle}
	if b.ServiceCIDR != "" {
		cluster["cidr"] = b.ServiceCIDR
	}
	spec := map[string]any{"cluster": cluster}
	if len(kubelet) > 0 {
		spec["kubelet"] = kubelet
	}
	if b.InstanceStorePolicy != nil && *b.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0 {
		spec["instance"] = map[string]any{"localStorage": map[string]any{"strategy": "RAID0"}}
	}
	doc, err := yaml.Marshal(map[string]any{"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec})
	if err != nil {
		return "", fmt.Errorf("render NodeConfig: %w", err)
	}
	return joinMIME(append([]mimePart{{ContentType: nodeConfigContentType, Body: string(doc)}}, user...)), nil
}

func putIf[T any](m map[string]any, key string, v *T) {
	if v != nil {
		m[key] = *v
	}
}

func putMap[K ~string, V any](m map[string]any, key string, v map[K]V) {
	if len(v) > 0 {
		m[key] = v
	}
}

// al2UserData writes a MIME document with the user's parts first and the bootstrap.sh call last.
func al2UserData(b bootstrap) (string, error) {
	user, err := splitUserData(b.UserData, "text/x-shellscript")
	if err != nil {
		return "", err
	}
	var s strings.Builder
	s.WriteString("#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	fmt.Fprintf(&s, "/etc/eks/bootstrap.sh %s --apiserver-endpoint %s --b64-cluster-ca %s", shellQuote(b.ClusterName), shellQuote(b.Endpoint), shellQuote(b.CABundle))
	k := b.Kubelet
	if k == nil {
		k = &awsv1.KubeletConfiguration{}
	}
	if len(k.ClusterDNS) > 0 {
		fmt.Fprintf(&s, " \\\n--dns-cluster-ip %s", shellQuote(k.ClusterDNS[0]))
	}
	if b.InstanceStorePolicy != nil && *b.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0 {
		s.WriteString(" \\\n--local-disks raid0")
	}
	var args []string
	if l := nodeLabels(b.Labels); l != "" {
		args = append(args, "--node-labels="+l)
	}
	if t := taintList(b.Taints); t != "" {
		args = append(args, "--register-with-taints="+t)
	}
	if k.MaxPods != nil {
		s.WriteString(" \\\n--use-max-pods false")
		args = append(args, "--max-pods="+strconv.Itoa(int(*k.MaxPods)))
	}
	if k.PodsPerCore != nil {
		args = append(args, "--pods-per-core="+strconv.Itoa(int(*k.PodsPerCore)))
	}
	for flag, m := range map[string]map[string]string{
		"--system-reserved": stringMap(k.SystemReserved), "--kube-reserved": stringMap(k.KubeReserved),
		"--eviction-hard": stringMap(k.EvictionHard), "--eviction-soft": stringMap(k.EvictionSoft),
	} {
		if len(m) > 0 {
			args = append(args, flag+"="+joinPairs(m, "=", ","))
		}
	}
	if len(k.EvictionSoftGracePeriod) > 0 {
		m := map[string]string{}
		for sig, d := range k.EvictionSoftGracePeriod {
			m[sig] = d.Duration.String()
		}
		args = append(args, "--eviction-soft-grace-period="+joinPairs(m, "=", ","))
	}
	if k.EvictionMaxPodGracePeriod != nil {
		args = append(args, "--eviction-max-pod-grace-period="+strconv.Itoa(int(*k.EvictionMaxPodGracePeriod)))
	}
	if k.ImageGCHighThresholdPercent != nil {
		args = append(args, "--image-gc-high-threshold="+strconv.Itoa(int(*k.ImageGCHighThresholdPercent)))
	}
	if k.ImageGCLowThresholdPercent != nil {
		args = append(args, "--image-gc-low-threshold="+strconv.Itoa(int(*k.ImageGCLowThresholdPercent)))
	}
	if k.CPUCFSQuota != nil {
		args = append(args, "--cpu-cfs-quota="+strconv.FormatBool(*k.CPUCFSQuota))
	}
	slices.Sort(args)
	if len(args) > 0 {
		fmt.Fprintf(&s, " \\\n--kubelet-extra-args %s", shellQuote(strings.Join(args, " ")))
	}
	s.WriteString("\n")
	return joinMIME(append(user, mimePart{ContentType: "text/x-shellscript; charset=\"us-ascii\"", Body: s.String()})), nil
}

// bottlerocketUserData merges the provider's settings into the user's TOML; the provider's win
// for the keys it sets.
func bottlerocketUserData(b bootstrap) (string, error) {
	doc := map[string]any{}
	if b.UserData != nil && strings.TrimSpace(*b.UserData) != "" {
		if _, err := toml.Decode(*b.UserData, &doc); err != nil {
			return "", fmt.Errorf("spec.userData: Bottlerocket user data must be TOML: %w", err)
		}
	}
	settings := subTable(doc, "settings")
	k8s := subTable(settings, "kubernetes")
	k8s["cluster-name"] = b.ClusterName
	k8s["api-server"] = b.Endpoint
	k8s["cluster-certificate"] = b.CABundle
	if len(b.Labels) > 0 {
		labels := subTable(k8s, "node-labels")
		maps.Copy(labels, anyMap(b.Labels))
	}
	if len(b.Taints) > 0 {
		taints := subTable(k8s, "node-taints")
		byKey := map[string][]string{}
		for _, t := range b.Taints {
			byKey[t.Key] = append(byKey[t.Key], t.Value+":"+string(t.Effect))
		}
		for key, vs := range byKey {
			taints[key] = vs
		}
	}
	if k := b.Kubelet; k != nil {
		if len(k.ClusterDNS) > 0 {
			k8s["cluster-dns-ip"] = k.ClusterDNS
		}
		if k.MaxPods != nil {
			k8s["max-pods"] = int64(*k.MaxPods)
		}
		if len(k.KubeReserved) > 0 {
			maps.Copy(subTable(k8s, "kube-reserved"), anyMap(stringMap(k.KubeReserved)))
		}
		if len(k.SystemReserved) > 0 {
			maps.Copy(subTable(k8s, "system-reserved"), anyMap(stringMap(k.SystemReserved)))
		}
		if len(k.EvictionHard) > 0 {
			maps.Copy(subTable(k8s, "eviction-hard"), anyMap(stringMap(k.EvictionHard)))
		}
		if k.ImageGCHighThresholdPercent != nil {
			k8s["image-gc-high-threshold-percent"] = int64(*k.ImageGCHighThresholdPercent)
		}
		if k.ImageGCLowThresholdPercent != nil {
			k8s["image-gc-low-threshold-percent"] = int64(*k.ImageGCLowThresholdPercent)
		}
		if k.CPUCFSQuota != nil {
			k8s["cpu-cfs-quota-enforced"] = *k.CPUCFSQuota
		}
	}
	var out bytes.Buffer
	if err := toml.NewEncoder(&out).Encode(doc); err != nil {
		return "", fmt.Errorf("render Bottlerocket settings: %w", err)
	}
	return out.String(), nil
}

// subTable returns the table under key, creating it (or replacing a non-table value).
func subTable(m map[string]any, key string) map[string]any {
	if t, ok := m[key].(map[string]any); ok {
		return t
	}
	t := map[string]any{}
	m[key] = t
	return t
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func stringMap[K ~string, V ~string](m map[K]V) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[string(k)] = string(v)
	}
	return out
}

// joinPairs renders a map as sorted "k<eq>v" pairs joined by sep.
func joinPairs(m map[string]string, eq, sep string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + eq + m[k]
	}
	return strings.Join(parts, sep)
}

// nodeLabels renders the labels a kubelet may set on its own Node as "k=v,...", sorted. Labels
// in the kubernetes.io and k8s.io namespaces are left out unless the kubelet may set them
// (NodeRestriction); registration copies every NodeClaim label onto the Node anyway.
func nodeLabels(labels map[string]string) string {
	m := map[string]string{}
	for k, v := range labels {
		if kubeletMaySet(k) {
			m[k] = v
		}
	}
	return joinPairs(m, "=", ",")
}

// kubeletSelfLabels are the kubernetes.io labels a kubelet may set on its Node.
var kubeletSelfLabels = []string{
	corev1.LabelHostname, corev1.LabelArchStable, corev1.LabelOSStable, corev1.LabelInstanceTypeStable,
	corev1.LabelInstanceType, corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion, "beta.kubernetes.io/arch", "beta.kubernetes.io/os",
}

func kubeletMaySet(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	restricted := func(d string) bool {
		return d == "kubernetes.io" || strings.HasSuffix(d, ".kubernetes.io") || d == "k8s.io" || strings.HasSuffix(d, ".k8s.io")
	}
	if !restricted(domain) {
		return true
	}
	if slices.Contains(kubeletSelfLabels, key) {
		return true
	}
	for _, allowed := range []string{"kubelet.kubernetes.io", "node.kubernetes.io"} {
		if domain == allowed || strings.HasSuffix(domain, "."+allowed) {
			return true
		}
	}
	return false
}

// taintList renders taints as the kubelet's --register-with-taints value: "k=v:Effect,...".
func taintList(taints []corev1.Taint) string {
	parts := make([]string, 0, len(taints))
	for _, t := range taints {
		s := t.Key
		if t.Value != "" {
			s += "=" + t.Value
		}
		parts = append(parts, s+":"+string(t.Effect))
	}
	return strings.Join(parts, ",")
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
