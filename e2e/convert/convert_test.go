package convert_test

import (
	"bytes"
	"context"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// kubectlRun runs the real kubectl against the test cluster, with stdin, and returns its combined output.
func kubectlRun(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", env.KubeconfigPath}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestConvertedManifestsApply is the migration as a user runs it: convert a folder of legacy manifests
// (a v1alpha5 Provisioner with its AWSNodeTemplate, a v1beta1 NodePool with its EC2NodeClass), pipe the
// result into kubectl apply, and find the v1 objects with the old behaviour spelled out.
func TestConvertedManifestsApply(t *testing.T) {
	ctx := context.Background()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(joinerBin, "convert", "--role", "KarpenterNodeRole-e2e", "-f", "testdata/legacy")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("joiner convert: %v (want exit 0: every field converts)\n%s", err, stderr.String())
	}
	for _, want := range []string{
		"note: testdata/legacy/provisioner.yaml:6: Provisioner/default spec.ttlSecondsUntilExpired: not set, so the Provisioner's nodes never expired; wrote expireAfter: Never",
		"Provisioner/default spec.requirements: added what the v1alpha5 webhook defaulted and v1 does not: kubernetes.io/os In [linux]",
		"AWSNodeTemplate/default spec.instanceProfile: no instanceProfile",
		"EC2NodeClass/general spec.amiFamily: amiFamily AL2, with no AMI selector, became amiSelectorTerms [{alias: al2@latest}]",
		"joiner convert: 4 objects converted, 0 unchanged; 0 errors",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("joiner convert's findings lack %q:\n%s", want, stderr.String())
		}
	}

	out, err := kubectlRun(t, stdout.String(), "apply", "-f", "-")
	t.Cleanup(func() {
		if out, err := kubectlRun(t, stdout.String(), "delete", "--ignore-not-found", "--wait=false", "-f", "-"); err != nil {
			t.Errorf("delete the converted objects: %v\n%s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("kubectl apply of the converted manifests: %v\n%s\n--- manifests:\n%s", err, out, stdout.String())
	}
	t.Logf("kubectl apply:\n%s", out)
	if strings.Contains(out, "does not exist") {
		t.Errorf("a nodeClassRef names a class kubectl had not created yet (the classes come first in the output):\n%s", out)
	}
	for _, want := range []string{
		"ec2nodeclass.karpenter.k8s.aws/default created", "ec2nodeclass.karpenter.k8s.aws/general created",
		"nodepool.karpenter.sh/default created", "nodepool.karpenter.sh/general created",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl apply output lacks %q:\n%s", want, out)
		}
	}

	get := func(name string, obj client.Object) {
		t.Helper()
		if err := c.Get(ctx, types.NamespacedName{Name: name}, obj); err != nil {
			t.Fatalf("read back %T %s: %v", obj, name, err)
		}
	}
	fromProvisioner, fromBeta := &karpv1.NodePool{}, &karpv1.NodePool{}
	fromTemplate, fromBetaClass := &awsv1.EC2NodeClass{}, &awsv1.EC2NodeClass{}
	get("default", fromProvisioner)
	get("general", fromBeta)
	get("default", fromTemplate)
	get("general", fromBetaClass)

	tags := map[string]string{"karpenter.sh/discovery": "e2e-cluster"}
	checks := []struct {
		what      string
		got, want any
	}{
		// v1alpha5 Provisioner -> NodePool.
		{"Provisioner: no ttlSecondsUntilExpired -> expireAfter", fromProvisioner.Spec.Template.Spec.ExpireAfter.String(), "Never"},
		{"Provisioner: ttlSecondsAfterEmpty -> consolidationPolicy", fromProvisioner.Spec.Disruption.ConsolidationPolicy, karpv1.ConsolidationPolicyWhenEmpty},
		{"Provisioner: ttlSecondsAfterEmpty -> consolidateAfter", fromProvisioner.Spec.Disruption.ConsolidateAfter.String(), "30s"},
		{"Provisioner: limits.resources.cpu -> limits.cpu", fromProvisioner.Spec.Limits.Cpu().String(), "100"},
		{"Provisioner: providerRef -> nodeClassRef", *fromProvisioner.Spec.Template.Spec.NodeClassRef,
			karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}},
		{"Provisioner: requirements, with the alpha default os", requirements(fromProvisioner), map[string][]string{
			"karpenter.k8s.aws/instance-category": {"c", "m"},
			"karpenter.k8s.aws/instance-family":   {"c5", "m5"},
			"topology.kubernetes.io/zone":         {"us-east-1a", "us-east-1b"},
			"kubernetes.io/arch":                  {"amd64"},
			"karpenter.sh/capacity-type":          {"spot", "on-demand"},
			"kubernetes.io/os":                    {"linux"},
		}},
		// v1alpha1 AWSNodeTemplate -> EC2NodeClass.
		{"AWSNodeTemplate: subnetSelector -> subnetSelectorTerms", fromTemplate.Spec.SubnetSelectorTerms, []awsv1.SubnetSelectorTerm{{Tags: tags}}},
		{"AWSNodeTemplate: securityGroupSelector -> securityGroupSelectorTerms", fromTemplate.Spec.SecurityGroupSelectorTerms,
			[]awsv1.SecurityGroupSelectorTerm{{Tags: tags}}},
		{"AWSNodeTemplate: default amiFamily AL2 -> alias", fromTemplate.Spec.AMISelectorTerms, []awsv1.AMISelectorTerm{{Alias: "al2@latest"}}},
		{"AWSNodeTemplate: amiFamily left to the alias", fromTemplate.Spec.AMIFamily, (*string)(nil)},
		{"AWSNodeTemplate: role from --role", fromTemplate.Spec.Role, "KarpenterNodeRole-e2e"},
		{"AWSNodeTemplate: legacy hop limit", fromTemplate.Spec.MetadataOptions.HTTPPutResponseHopLimit, ptr.To[int64](2)},
		// v1beta1 NodePool -> v1.
		{"v1beta1 NodePool: disruption.expireAfter -> template", fromBeta.Spec.Template.Spec.ExpireAfter.String(), "336h"},
		{"v1beta1 NodePool: WhenUnderutilized", fromBeta.Spec.Disruption.ConsolidationPolicy, karpv1.ConsolidationPolicyWhenEmptyOrUnderutilized},
		{"v1beta1 NodePool: consolidateAfter", fromBeta.Spec.Disruption.ConsolidateAfter.String(), "0s"},
		{"v1beta1 NodePool: nodeClassRef apiVersion -> group", *fromBeta.Spec.Template.Spec.NodeClassRef,
			karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "general"}},
		// v1beta1 EC2NodeClass -> v1.
		{"v1beta1 EC2NodeClass: amiFamily AL2 -> alias", fromBetaClass.Spec.AMISelectorTerms, []awsv1.AMISelectorTerm{{Alias: "al2@latest"}}},
		{"v1beta1 EC2NodeClass: amiFamily left to the alias", fromBetaClass.Spec.AMIFamily, (*string)(nil)},
		{"v1beta1 EC2NodeClass: role kept", fromBetaClass.Spec.Role, "KarpenterNodeRole-e2e"},
		{"v1beta1 EC2NodeClass: legacy hop limit", fromBetaClass.Spec.MetadataOptions.HTTPPutResponseHopLimit, ptr.To[int64](2)},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s: read back %#v, want %#v", ch.what, ch.got, ch.want)
		}
	}

	// Applying the same output again changes nothing: durations and quantities round-trip as written,
	// so a GitOps tool sees no drift.
	out, err = kubectlRun(t, stdout.String(), "apply", "-f", "-")
	if err != nil {
		t.Fatalf("second kubectl apply: %v\n%s", err, out)
	}
	if n := strings.Count(out, " unchanged"); n != 4 || strings.Contains(out, "configured") {
		t.Errorf("second apply changed something (want 4 objects unchanged):\n%s", out)
	}
}

// requirements returns a NodePool's requirements as key -> values.
func requirements(np *karpv1.NodePool) map[string][]string {
	out := map[string][]string{}
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn {
			out[r.Key] = slices.Clone(r.Values)
		}
	}
	return out
}
