package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/testbed"
)

// TestKustomizeAWSOverlay: config/overlays/aws is config/default with the aws provider and the
// placeholder cluster name, and keeps every property of the default install.
func TestKustomizeAWSOverlay(t *testing.T) {
	m := parse(t, kustomize(t, "config/overlays/aws"))
	w := defaults()
	w.clusterArg = "CLUSTER_NAME"
	checkCommon(t, m, w)

	p := controllerOf(t, m)
	if got := p.flags["--cloud-provider"]; got != "aws" {
		t.Errorf("--cloud-provider = %q, want aws; args %v", got, p.container.Args)
	}
	base := controllerOf(t, parse(t, kustomize(t, "config/default")))
	if len(p.container.Args) != len(base.container.Args)+1 {
		t.Errorf("args %v: want config/default's %v with --cloud-provider=aws and one --cluster-name added", p.container.Args, base.container.Args)
	}
}

// TestAWSSamplesOnAPIServer: config/samples/aws is accepted by the apiserver under the generated
// CRDs (their OpenAPI schemas and CEL rules, strict field validation), and has the shape of
// Karpenter's getting-started pair.
func TestAWSSamplesOnAPIServer(t *testing.T) {
	dir := filepath.Join(repoRoot, "config", "samples", "aws")
	var stream []byte
	for _, f := range yamlFiles(t, dir) {
		raw, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		stream = append(append(stream, "\n---\n"...), raw...)
	}
	samples := parse(t, stream)
	var nodeClass, nodePool object
	for _, o := range samples {
		switch o.Kind {
		case "EC2NodeClass":
			nodeClass = o
		case "NodePool":
			nodePool = o
		default:
			t.Errorf("unexpected %s in config/samples/aws", o.key())
		}
	}
	checks := []struct {
		what   string
		obj    object
		path   string
		want   string
		hasSub bool
	}{
		{"the AMI alias", nodeClass, "/spec/amiSelectorTerms/0/alias", "al2023@latest", false},
		{"the node role", nodeClass, "/spec/role", "CLUSTER_NAME", true},
		{"subnet discovery", nodeClass, "/spec/subnetSelectorTerms/0/tags/karpenter.sh~1discovery", "CLUSTER_NAME", false},
		{"security group discovery", nodeClass, "/spec/securityGroupSelectorTerms/0/tags/karpenter.sh~1discovery", "CLUSTER_NAME", false},
		{"the node class reference", nodePool, "/spec/template/spec/nodeClassRef/name", nodeClass.Name, false},
		{"the node class kind", nodePool, "/spec/template/spec/nodeClassRef/kind", "EC2NodeClass", false},
	}
	for _, c := range checks {
		got, _ := jsonPointer(c.obj.Fields, c.path)
		s, _ := got.(string)
		if (c.hasSub && !strings.Contains(s, c.want)) || (!c.hasSub && s != c.want) {
			t.Errorf("%s: %s = %v, want %q", c.what, c.path, got, c.want)
		}
	}

	env := testbed.StartForTest(t, testbed.Options{})
	c := cluster{kubectl: kubectl(t), kubeconfig: env.KubeconfigPath}
	c.must(t, kustomize(t, "config/crd"), "apply", "--server-side", "--validate=strict", "-f", "-")
	c.must(t, nil, "wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
	out := c.must(t, nil, "apply", "--server-side", "--dry-run=server", "--validate=strict", "-f", dir)
	if strings.Contains(out, "Warning") {
		t.Errorf("applying config/samples/aws produced warnings:\n%s", out)
	}
}
