package aws

import (
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

func testBootstrap() bootstrap {
	raid0 := awsv1.InstanceStorePolicyRAID0
	return bootstrap{
		ClusterName: "prod", Endpoint: "https://ABC.gr7.us-east-1.eks.amazonaws.com", CABundle: "Q0E=", ServiceCIDR: "10.100.0.0/16",
		Kubelet: &awsv1.KubeletConfiguration{
			MaxPods: aws.Int32(58), ClusterDNS: []string{"10.100.0.10"},
			KubeReserved: map[string]awsv1.ResourceQuantityString{"cpu": "100m"},
			EvictionHard: map[string]awsv1.EvictionThreshold{"memory.available": "5%"},
		},
		Labels: map[string]string{
			"karpenter.sh/nodepool": "default", "team": "a",
			"node-restriction.kubernetes.io/x": "no", "kubernetes.io/arch": "amd64", "node.kubernetes.io/role": "web",
		},
		Taints:              []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, {Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}},
		InstanceStorePolicy: &raid0,
	}
}

// mimeParts splits the provider's MIME output into content type and body.
func mimeParts(t *testing.T, s string) []mimePart {
	t.Helper()
	parts, err := splitUserData(&s, "none")
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) == 1 && parts[0].ContentType == "none" {
		t.Fatalf("not a MIME document:\n%s", s)
	}
	return parts
}

func TestAL2023UserData(t *testing.T) {
	for _, tc := range []struct {
		name      string
		userData  *string
		wantParts []string // content types after the provider's NodeConfig
	}{
		{name: "no user data"},
		{name: "a user NodeConfig", userData: aws.String("apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n"),
			wantParts: []string{nodeConfigContentType}},
		{name: "a script", userData: aws.String("#!/bin/bash\necho hi\n"), wantParts: []string{"text/x-shellscript"}},
		{name: "a MIME document", userData: aws.String("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho one\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\nkind: NodeConfig\n\n--BOUNDARY--\n"),
			wantParts: []string{"text/x-shellscript; charset=\"us-ascii\"", nodeConfigContentType}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBootstrap()
			b.UserData = tc.userData
			out, err := renderUserData(awsv1.AMIFamilyAL2023, b)
			if err != nil {
				t.Fatal(err)
			}
			parts := mimeParts(t, out)
			if len(parts) != 1+len(tc.wantParts) || parts[0].ContentType != nodeConfigContentType {
				t.Fatalf("got parts %+v, want the NodeConfig then %v", parts, tc.wantParts)
			}
			for i, ct := range tc.wantParts {
				if parts[i+1].ContentType != ct {
					t.Errorf("part %d has type %q, want %q", i+1, parts[i+1].ContentType, ct)
				}
			}
			var doc struct {
				Kind string
				Spec struct {
					Cluster struct{ Name, APIServerEndpoint, CertificateAuthority, CIDR string }
					Kubelet struct {
						Config map[string]any
						Flags  []string
					}
					Instance struct{ LocalStorage struct{ Strategy string } }
				}
			}
			if err := yaml.Unmarshal([]byte(parts[0].Body), &doc); err != nil {
				t.Fatalf("NodeConfig is not YAML: %v\n%s", err, parts[0].Body)
			}
			c := doc.Spec.Cluster
			if doc.Kind != "NodeConfig" || c.Name != "prod" || c.APIServerEndpoint != b.Endpoint || c.CertificateAuthority != "Q0E=" || c.CIDR != "10.100.0.0/16" {
				t.Errorf("cluster section wrong: %+v", doc)
			}
			if doc.Spec.Kubelet.Config["maxPods"] != float64(58) || doc.Spec.Kubelet.Config["clusterDNS"] == nil ||
				doc.Spec.Kubelet.Config["kubeReserved"] == nil || doc.Spec.Kubelet.Config["evictionHard"] == nil {
				t.Errorf("kubelet config wrong: %v", doc.Spec.Kubelet.Config)
			}
			wantFlags := []string{
				"--node-labels=karpenter.sh/nodepool=default,kubernetes.io/arch=amd64,node.kubernetes.io/role=web,team=a",
				"--register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute",
			}
			if strings.Join(doc.Spec.Kubelet.Flags, " ") != strings.Join(wantFlags, " ") {
				t.Errorf("flags = %q, want %q", doc.Spec.Kubelet.Flags, wantFlags)
			}
			if doc.Spec.Instance.LocalStorage.Strategy != "RAID0" {
				t.Errorf("RAID0 missing")
			}
		})
	}
}

func TestAL2UserData(t *testing.T) {
	b := testBootstrap()
	b.UserData = aws.String("#!/bin/bash\necho custom\n")
	out, err := renderUserData(awsv1.AMIFamilyAL2, b)
	if err != nil {
		t.Fatal(err)
	}
	parts := mimeParts(t, out)
	if len(parts) != 2 || !strings.Contains(parts[0].Body, "echo custom") {
		t.Fatalf("want the user's script first, then the bootstrap: %+v", parts)
	}
	script := parts[1].Body
	for _, want := range []string{
		"/etc/eks/bootstrap.sh 'prod' --apiserver-endpoint 'https://ABC.gr7.us-east-1.eks.amazonaws.com' --b64-cluster-ca 'Q0E='",
		"--dns-cluster-ip '10.100.0.10'", "--local-disks raid0", "--use-max-pods false",
		"--max-pods=58", "--kube-reserved=cpu=100m", "--eviction-hard=memory.available=5%",
		"--node-labels=karpenter.sh/nodepool=default,kubernetes.io/arch=amd64,node.kubernetes.io/role=web,team=a",
		"--register-with-taints=dedicated=gpu:NoSchedule,karpenter.sh/unregistered:NoExecute",
	} {
		if !strings.Contains(script, want) {
			t.Errorf("bootstrap script lacks %q:\n%s", want, script)
		}
	}
	if strings.Contains(script, "node-restriction") {
		t.Error("a label the kubelet may not set leaked into --node-labels")
	}
}

func TestBottlerocketUserData(t *testing.T) {
	b := testBootstrap()
	b.UserData = aws.String("[settings.kubernetes]\nmax-pods = 10\nallowed-unsafe-sysctls = [\"net.core.somaxconn\"]\n\n[settings.host-containers.admin]\nenabled = true\n")
	out, err := renderUserData(awsv1.AMIFamilyBottlerocket, b)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Settings struct {
			Kubernetes struct {
				ClusterName          string              `toml:"cluster-name"`
				APIServer            string              `toml:"api-server"`
				ClusterCertificate   string              `toml:"cluster-certificate"`
				ClusterDNSIP         []string            `toml:"cluster-dns-ip"`
				MaxPods              int                 `toml:"max-pods"`
				AllowedUnsafeSysctls []string            `toml:"allowed-unsafe-sysctls"`
				NodeLabels           map[string]string   `toml:"node-labels"`
				NodeTaints           map[string][]string `toml:"node-taints"`
				KubeReserved         map[string]string   `toml:"kube-reserved"`
				EvictionHard         map[string]string   `toml:"eviction-hard"`
			}
			HostContainers map[string]map[string]bool `toml:"host-containers"`
		}
	}
	if _, err := toml.Decode(out, &doc); err != nil {
		t.Fatalf("output is not TOML: %v\n%s", err, out)
	}
	k := doc.Settings.Kubernetes
	if k.ClusterName != "prod" || k.APIServer != b.Endpoint || k.ClusterCertificate != "Q0E=" || len(k.ClusterDNSIP) != 1 {
		t.Errorf("cluster settings wrong: %+v", k)
	}
	if k.MaxPods != 58 {
		t.Errorf("max-pods = %d, want the class's 58 over the user's 10", k.MaxPods)
	}
	if len(k.AllowedUnsafeSysctls) != 1 || !doc.Settings.HostContainers["admin"]["enabled"] {
		t.Errorf("the user's settings were lost:\n%s", out)
	}
	if k.NodeLabels["team"] != "a" || k.NodeTaints["dedicated"][0] != "gpu:NoSchedule" || k.KubeReserved["cpu"] != "100m" || k.EvictionHard["memory.available"] != "5%" {
		t.Errorf("labels, taints or reservations wrong: %+v", k)
	}
	b.UserData = aws.String("not = [toml")
	if _, err := renderUserData(awsv1.AMIFamilyBottlerocket, b); err == nil || !strings.Contains(err.Error(), "spec.userData") {
		t.Errorf("invalid TOML: err = %v, want one naming spec.userData", err)
	}
}

func TestCustomAndWindowsUserData(t *testing.T) {
	b := testBootstrap()
	b.UserData = aws.String("anything goes")
	if out, err := renderUserData(awsv1.AMIFamilyCustom, b); err != nil || out != "anything goes" {
		t.Errorf("Custom = %q, %v; want the user data unchanged", out, err)
	}
	b.UserData = nil
	if out, err := renderUserData(awsv1.AMIFamilyCustom, b); err != nil || out != "" {
		t.Errorf("Custom without user data = %q, %v", out, err)
	}
	if _, err := renderUserData(awsv1.AMIFamilyWindows2022, b); err == nil {
		t.Error("Windows user data is not implemented and must say so")
	}
}

func TestKubeletMaySet(t *testing.T) {
	for key, want := range map[string]bool{
		"team": true, "karpenter.sh/nodepool": true, "example.com/x": true,
		"kubernetes.io/arch": true, "topology.kubernetes.io/zone": true, "node.kubernetes.io/instance-type": true,
		"node.kubernetes.io/role": true, "kubelet.kubernetes.io/x": true,
		"node-restriction.kubernetes.io/x": false, "kubernetes.io/custom": false, "foo.k8s.io/bar": false,
	} {
		if got := kubeletMaySet(key); got != want {
			t.Errorf("kubeletMaySet(%q) = %v, want %v", key, got, want)
		}
	}
}
