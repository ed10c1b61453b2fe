package convert

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/fileinput"
)

// updateGoldenEnv, set to 1, rewrites the golden files from what the conversion produces.
const updateGoldenEnv = "JOINER_UPDATE_GOLDEN"

// TestConvert converts testdata/<name>/in.yaml and compares the output with want.yaml and the findings
// with findings.txt. Each case also names the findings that matter for its mapping rules, so a golden
// file rewritten by mistake cannot hide a lost warning.
func TestConvert(t *testing.T) {
	tests := []struct {
		name       string
		opts       Options
		wantFailed bool
		// wantFindings are substrings of findings ("severity: ... field: message").
		wantFindings []string
		// wantUnchanged says the output is the input, byte for byte.
		wantUnchanged bool
	}{
		{
			name: "provisioner-ttl",
		},
		{
			name: "provisioner-old-defaults",
			wantFindings: []string{
				"note: testdata/provisioner-old-defaults/in.yaml:5: Provisioner/default spec.ttlSecondsUntilExpired: not set, so the Provisioner's nodes never expired; wrote expireAfter: Never",
				"spec.consolidation: neither ttlSecondsAfterEmpty nor consolidation.enabled was set",
				"kubernetes.io/os In [linux]; kubernetes.io/arch In [amd64]; karpenter.sh/capacity-type In [on-demand]; karpenter.k8s.aws/instance-category In [c,m,r]; karpenter.k8s.aws/instance-generation Gt [2]",
			},
		},
		{
			name: "provisioner-ignore-defaults", opts: Options{IgnoreDefaults: true},
			wantFindings: []string{"expireAfter: Never"},
		},
		{
			name: "provisioner-consolidation", wantFailed: true,
			wantFindings: []string{
				"error: testdata/provisioner-consolidation/in.yaml:26: Provisioner/both spec.ttlSecondsAfterEmpty: left out: it cannot be combined with consolidation.enabled",
				"Provisioner/disabled spec.consolidation: neither ttlSecondsAfterEmpty nor consolidation.enabled was set",
			},
		},
		{
			name: "provisioner-inline-provider",
			wantFindings: []string{
				`Provisioner/inline spec.provider: became EC2NodeClass "inline"`,
				`Provisioner/inline spec.kubeletConfiguration: moved to EC2NodeClass "inline" spec.kubelet`,
				"Provisioner/inline spec.provider.metadataOptions.httpPutResponseHopLimit: not set; wrote the legacy default 2",
			},
		},
		{
			name: "provisioner-kubelet-shared", wantFailed: true,
			wantFindings: []string{
				"error: testdata/provisioner-kubelet-shared/in.yaml:24: Provisioner/one spec.kubeletConfiguration.containerRuntime: left out: v1 runs containerd only",
				`Provisioner/one spec.kubeletConfiguration: moved to EC2NodeClass "shared" spec.kubelet`,
				`Provisioner/two spec.kubeletConfiguration: moved to EC2NodeClass "shared" spec.kubelet`,
			},
		},
		{
			name: "provisioner-kubelet-split",
			wantFindings: []string{
				`Provisioner/dense spec.kubeletConfiguration: moved to the new EC2NodeClass "default-dense", a copy of "default"`,
				`Provisioner/sparse spec.kubeletConfiguration: moved to the new EC2NodeClass "default-sparse"`,
				`Provisioner/sparse-too spec.kubeletConfiguration: moved to the new EC2NodeClass "default-sparse"`,
			},
		},
		{
			name: "provisioner-kubelet-missing-class", wantFailed: true,
			wantFindings: []string{
				"spec.kubeletConfiguration.maxPodsPerNode: left out: not a kubelet setting",
				`error: testdata/provisioner-kubelet-missing-class/in.yaml:8: Provisioner/lonely spec.kubeletConfiguration: left out: v1 keeps kubelet settings on the EC2NodeClass, and EC2NodeClass "somewhere-else" is not among the inputs; add them to its spec.kubelet: {clusterDNS: ["10.0.0.10"], imageGCHighThresholdPercent: 85, imageGCLowThresholdPercent: 80}`,
			},
		},
		{
			name: "provisioner-restricted", wantFailed: true,
			wantFindings: []string{
				"spec.requirements[0]: left out: a NodePool may not require karpenter.sh/provisioner-name",
				"spec.requirements[1]: left out: v1 has no karpenter.k8s.aws/instance-pods label",
				"spec.labels[karpenter.sh/provisioner-name]: left out: v1 reserves this label",
				"note: testdata/provisioner-restricted/in.yaml:20: Provisioner/restricted spec.annotations[karpenter.sh/do-not-consolidate]: renamed to karpenter.sh/do-not-disrupt",
				"spec.providerRef: missing: a v1 NodePool needs spec.template.spec.nodeClassRef",
			},
		},
		{
			name: "misplaced", wantFailed: true,
			wantFindings: []string{
				"error: testdata/misplaced/in.yaml:5: Provisioner/misplaced metadata.ttlSecondsAfterEmpty: misplaced: ttlSecondsAfterEmpty is not a field here, it belongs at spec.ttlSecondsAfterEmpty",
				"error: testdata/misplaced/in.yaml:8: Provisioner/misplaced spec.consolidation.enable: not a field of the Provisioner, left out",
				"error: testdata/misplaced/in.yaml:12: Provisioner/misplaced spec.resources: misplaced: resources is not a field here, it belongs at spec.limits.resources",
				"error: testdata/misplaced/in.yaml:14: Provisioner/misplaced limits: misplaced: limits is not a field here, it belongs at spec.limits",
				"AWSNodeTemplate/default spec.provider: not a field of the AWSNodeTemplate",
				"AWSNodeTemplate/default amiFamily: misplaced: amiFamily is not a field here, it belongs at spec.amiFamily",
			},
		},
		{
			name: "nodetemplate-selectors", opts: Options{Role: "KarpenterNodeRole-demo"},
			wantFindings: []string{
				"AWSNodeTemplate/bottlerocket: left out what the API server and controllers write for the old object: status, metadata.uid, metadata.resourceVersion, metadata.creationTimestamp, metadata.annotations[karpenter.k8s.aws/nodetemplate-hash]",
				"spec.amiFamily: amiFamily Bottlerocket, with no AMI selector, became amiSelectorTerms [{alias: bottlerocket@latest}]",
				"spec.subnetSelector: comma-separated values became one term each",
				"spec.instanceProfile: no instanceProfile (the class used the global aws.defaultInstanceProfile, which v1 removed); wrote role: KarpenterNodeRole-demo from --role",
				"spec.metadataOptions: not set; wrote the legacy defaults",
			},
		},
		{
			name: "nodetemplate-amiselector", wantFailed: true,
			wantFindings: []string{
				"AWSNodeTemplate/pinned spec.tags[kubernetes.io/cluster/demo]: left out: v1 reserves this tag",
				"AWSNodeTemplate/custom spec.amiFamily: amiFamily Custom needs amiSelectorTerms",
				"AWSNodeTemplate/by-id spec.amiFamily: not set; wrote AL2, the legacy default",
				"AWSNodeTemplate/custom spec.amiFamily: amiFamily Custom needs amiSelectorTerms",
			},
		},
		{
			name: "nodetemplate-unsupported", wantFailed: true,
			wantFindings: []string{
				"AWSNodeTemplate/launch-template spec.launchTemplate: left out: v1 has no launchTemplate",
				"AWSNodeTemplate/launch-template spec.instanceProfile: no instanceProfile, and v1 has no global default",
				"AWSNodeTemplate/ubuntu spec.amiFamily: left out: v1 removed the Ubuntu family",
			},
		},
		{
			name: "beta-nodepool", wantFailed: true,
			wantFindings: []string{
				"NodePool/general spec.template.spec.resources: left out: v1 NodePool templates have no resources",
				`NodePool/general spec.template.spec.kubelet: moved to EC2NodeClass "general" spec.kubelet`,
				"NodePool/general spec.template.metadata.annotations[karpenter.sh/do-not-consolidate]: renamed to karpenter.sh/do-not-disrupt",
				"EC2NodeClass/general spec.amiFamily: amiFamily AL2, with no AMI selector, became amiSelectorTerms [{alias: al2@latest}]",
			},
		},
		{
			name: "beta-nodepool-whenempty",
			wantFindings: []string{
				"NodePool/no-after spec.disruption.consolidateAfter: not set with WhenEmpty, which v1 requires; wrote Never",
			},
		},
		{
			name: "beta-ec2nodeclass", wantFailed: true,
			wantFindings: []string{
				"EC2NodeClass/pinned spec.amiFamily: amiFamily AL2023, with no AMI selector, became amiSelectorTerms [{alias: al2023@v20240625}] (pinned",
				"EC2NodeClass/pinned spec.metadataOptions.httpPutResponseHopLimit: not set; wrote the legacy default 2",
				"EC2NodeClass/ubuntu spec.amiFamily: v1 removed the Ubuntu family; wrote AL2",
			},
		},
		{
			name: "beta-nodeclaim", wantFailed: true,
			wantFindings: []string{
				"NodeClaim/general-abcde spec.kubelet: left out: a v1 NodeClaim has no kubelet settings",
				"NodeClaim/general-abcde spec.expireAfter: set to 168h, its NodePool's",
				"Machine/default-xyz: not converted, and left out",
			},
		},
		{name: "v1-passthrough", wantUnchanged: true},
		{
			name: "workload-renames",
			wantFindings: []string{
				"Deployment/web spec.template.metadata.annotations[karpenter.sh/do-not-evict]: renamed to karpenter.sh/do-not-disrupt",
				"Deployment/web spec.template.spec.nodeSelector[karpenter.sh/provisioner-name]: renamed to karpenter.sh/nodepool",
				"Deployment/web spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key: karpenter.sh/provisioner-name renamed to karpenter.sh/nodepool",
				"Deployment/web spec.template.spec.topologySpreadConstraints[0].topologyKey: karpenter.sh/provisioner-name renamed",
				"Node/ip-10-0-0-1.ec2.internal metadata.annotations[karpenter.sh/do-not-consolidate]: left out: karpenter.sh/do-not-disrupt is set too",
			},
		},
		{
			name:         "list",
			wantFindings: []string{`Provisioner/listed spec.provider: became EC2NodeClass "listed"`},
		},
		{
			name: "unknown-kind", wantFailed: true,
			wantFindings: []string{"NodePool/mixed-up apiVersion: no conversion for kind NodePool in karpenter.sh/v1alpha5"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join("testdata", tt.name)
			inPath := filepath.Join(dir, "in.yaml")
			in, err := os.ReadFile(inPath)
			if err != nil {
				t.Fatal(err)
			}
			res, err := Convert(context.Background(), []Input{{Name: inPath, Rel: "in.yaml", Data: in}}, tt.opts)
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			var findings strings.Builder
			for _, f := range res.Findings {
				findings.WriteString(f.String() + "\n")
			}
			out := res.Outputs[0].Data
			golden(t, filepath.Join(dir, "want.yaml"), out)
			golden(t, filepath.Join(dir, "findings.txt"), []byte(findings.String()))
			if got := res.Failed(); got != tt.wantFailed {
				t.Errorf("Failed() = %v, want %v; findings:\n%s", got, tt.wantFailed, findings.String())
			}
			for _, want := range tt.wantFindings {
				if !strings.Contains(findings.String(), want) {
					t.Errorf("findings lack %q:\n%s", want, findings.String())
				}
			}
			if tt.wantUnchanged && !bytes.Equal(out, in) {
				t.Errorf("output differs from the input:\n%s", out)
			}
			decodeV1(t, out)
			// Converting the output again changes nothing: it is v1, or needs no rename. (What could not be
			// converted is written back as it was, and reported again.)
			again, err := Convert(context.Background(), []Input{{Name: "again.yaml", Data: out}}, tt.opts)
			if err != nil {
				t.Fatalf("Convert the output: %v", err)
			}
			if !bytes.Equal(again.Outputs[0].Data, out) || (!tt.wantFailed && len(again.Findings) > 0) {
				t.Errorf("converting the output again changed it or found something: %v\n%s", again.Findings, again.Outputs[0].Data)
			}
		})
	}
}

// golden compares got with the file at path, or rewrites the file when updateGoldenEnv is 1.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if os.Getenv(updateGoldenEnv) == "1" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with %s=1 to write it)", err, updateGoldenEnv)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run with %s=1 to rewrite it)\n--- got:\n%s\n--- want:\n%s", path, updateGoldenEnv, got, want)
	}
}

// decodeV1 decodes each Karpenter v1 object of a converted stream strictly into Joiner's API types, so
// an output field the API does not have, or of the wrong type, fails the test.
func decodeV1(t *testing.T, out []byte) {
	t.Helper()
	for _, ch := range splitDocuments(out) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := sigsyaml.Unmarshal(ch.text, &head); err != nil {
			t.Fatalf("output document at line %d: %v", ch.line, err)
		}
		var obj any
		switch {
		case head.APIVersion == apiV1 && head.Kind == kindNodePool:
			obj = &karpv1.NodePool{}
		case head.APIVersion == apiV1 && head.Kind == kindNodeClaim:
			obj = &karpv1.NodeClaim{}
		case head.APIVersion == apiAWSV1 && head.Kind == kindEC2NodeClass:
			obj = &awsv1.EC2NodeClass{}
		default:
			continue
		}
		if err := sigsyaml.UnmarshalStrict(ch.text, obj); err != nil {
			t.Errorf("output %s at line %d does not decode as the v1 type: %v\n%s", head.Kind, ch.line, err, ch.text)
		}
	}
}

func TestFormatSeconds(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0s"}, {30, "30s"}, {90, "1m30s"}, {3600, "1h"}, {3661, "1h1m1s"}, {86400, "24h"}, {2592000, "720h"},
	}
	for _, tt := range tests {
		if got := formatSeconds(tt.in); got != tt.want {
			t.Errorf("formatSeconds(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestDurationOfRejectsWhatIsNotSeconds(t *testing.T) {
	tests := []struct {
		name, in string
		want     string
		wantErr  bool
	}{
		{name: "seconds", in: "300", want: "5m"},
		{name: "negative", in: "-1", want: "Never", wantErr: true},
		{name: "a duration already", in: "30s", want: "Never", wantErr: true},
		{name: "fraction", in: "1.5", want: "Never", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var findings []Finding
			rep := &reporter{source: "x.yaml", firstLine: 1, object: "Provisioner/p", findings: &findings}
			got := durationOf(rep, &yaml.Node{Kind: yaml.ScalarNode, Value: tt.in, Line: 3}, "spec.ttlSecondsAfterEmpty")
			if got.Value != tt.want {
				t.Errorf("got %q, want %q", got.Value, tt.want)
			}
			if (len(findings) > 0) != tt.wantErr {
				t.Errorf("findings %v, want an error: %v", findings, tt.wantErr)
			}
			if tt.wantErr && findings[0].String() != `error: x.yaml:3: Provisioner/p spec.ttlSecondsAfterEmpty: "`+tt.in+`" is not a whole number of seconds; wrote Never instead: fix it and convert again` {
				t.Errorf("finding %q", findings[0])
			}
		})
	}
}

func TestSplitDocuments(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantLines []int
		wantTexts []string
	}{
		{name: "one", in: "a: 1\n", wantLines: []int{1}, wantTexts: []string{"a: 1\n"}},
		{name: "leading separator", in: "---\na: 1\n---\nb: 2\n", wantLines: []int{2, 4}, wantTexts: []string{"a: 1\n", "b: 2\n"}},
		{name: "separator with comment", in: "a: 1\n--- # next\nb: 2", wantLines: []int{1, 3}, wantTexts: []string{"a: 1\n", "b: 2"}},
		{name: "indented dashes are content", in: "a: |\n  ---\n  x\n", wantLines: []int{1}, wantTexts: []string{"a: |\n  ---\n  x\n"}},
		{name: "not a separator", in: "a: 1\n---b\n", wantLines: []int{1}, wantTexts: []string{"a: 1\n---b\n"}},
		{name: "empty documents dropped, comments kept", in: "---\n\n---\n# c\n---\na: 1\n", wantLines: []int{4, 6}, wantTexts: []string{"# c\n", "a: 1\n"}},
		{name: "windows line ends", in: "a: 1\r\n---\r\nb: 2\r\n", wantLines: []int{1, 3}, wantTexts: []string{"a: 1\r\n", "b: 2\r\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := splitDocuments([]byte(tt.in))
			if len(got) != len(tt.wantLines) {
				t.Fatalf("got %d documents, want %d: %+v", len(got), len(tt.wantLines), got)
			}
			for i, ch := range got {
				if ch.line != tt.wantLines[i] || string(ch.text) != tt.wantTexts[i] {
					t.Errorf("document %d: line %d %q, want line %d %q", i, ch.line, ch.text, tt.wantLines[i], tt.wantTexts[i])
				}
			}
		})
	}
}

func TestConvertRejectsInvalidYAML(t *testing.T) {
	_, err := Convert(context.Background(), []Input{{Name: "bad.yaml", Data: []byte("a: 1\n---\nkind: [unclosed\n")}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "bad.yaml: document 2 (starting at line 3): not valid YAML") {
		t.Fatalf("err = %v, want it to name the file, document and line", err)
	}
}

func TestReadInputsAndWriteDir(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{
		"a.yaml":          "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: a}\nspec: {providerRef: {name: a}}\n",
		"nested/b.yml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n",
		"nested/c.json":   `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}`,
		"nested/skip.txt": "not a manifest",
	}
	for name, content := range files {
		path := filepath.Join(src, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stdin := fileinput.Options{Stdin: strings.NewReader("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")}
	inputs, listings, err := ReadInputs(context.Background(), []string{src, "-"}, stdin)
	if err != nil {
		t.Fatal(err)
	}
	var rels []string
	for _, in := range inputs {
		rels = append(rels, in.Rel)
	}
	if got, want := strings.Join(rels, ","), "a.yaml,nested/b.yml,nested/c.json,stdin.yaml"; got != want {
		t.Fatalf("read %s, want %s", got, want)
	}
	if len(listings) != 2 || !listings[0].Folder || listings[0].Read != 3 || listings[1].Read != 1 {
		t.Errorf("listings = %+v, want the folder with 3 files read and standard input", listings)
	}
	if _, _, err := ReadInputs(context.Background(), []string{"-", "-"}, fileinput.Options{Stdin: strings.NewReader("")}); err == nil || !strings.Contains(err.Error(), "named more than once") {
		t.Errorf("reading standard input twice: %v", err)
	}
	if _, _, err := ReadInputs(context.Background(), []string{filepath.Join(src, "missing.yaml")}, fileinput.Options{}); err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("reading a missing file: %v", err)
	}
	res, err := Convert(context.Background(), inputs, Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := res.WriteDir(out); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(out, "a.yaml"))
	if err != nil || !strings.Contains(string(got), "kind: NodePool") {
		t.Errorf("a.yaml: %v\n%s", err, got)
	}
	got, err = os.ReadFile(filepath.Join(out, "nested", "c.json"))
	if err != nil || string(got) != files["nested/c.json"]+"\n" {
		t.Errorf("nested/c.json is not written back unchanged: %v %q", err, got)
	}
	if _, err := os.Stat(filepath.Join(out, "stdin.yaml")); err != nil {
		t.Errorf("stdin.yaml: %v", err)
	}
	if err := res.WriteDir(src); err == nil || !strings.Contains(err.Error(), "it is an input") {
		t.Errorf("writing over the inputs: %v", err)
	}
}

// TestMissingSpec checks the one message every legacy kind gives when its spec is missing, with the
// article its kind takes.
func TestMissingSpec(t *testing.T) {
	tests := []struct{ apiVersion, kind, want string }{
		{"karpenter.sh/v1alpha5", "Provisioner", "missing; a Provisioner needs a spec"},
		{"karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate", "missing; an AWSNodeTemplate needs a spec"},
		{"karpenter.sh/v1beta1", "NodePool", "missing; a NodePool needs a spec"},
		{"karpenter.sh/v1beta1", "NodeClaim", "missing; a NodeClaim needs a spec"},
		{"karpenter.k8s.aws/v1beta1", "EC2NodeClass", "missing; an EC2NodeClass needs a spec"},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			in := fmt.Sprintf("apiVersion: %s\nkind: %s\nmetadata:\n  name: x\n", tt.apiVersion, tt.kind)
			res, err := Convert(context.Background(), []Input{{Name: "in.yaml", Data: []byte(in)}}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range res.Findings {
				if f.Field == "spec" && f.Severity == SeverityError {
					got = append(got, f.Message)
				}
			}
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("spec findings = %q, want [%q]", got, tt.want)
			}
		})
	}
}

// TestConvertStopsAndCountsNothing: a done context stops a conversion, with its cause, and input with only
// comments converts to an empty Result.
func TestConvertStopsAndCountsNothing(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("terminated signal received"))
	in := []Input{{Name: "-", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")}}
	if _, err := Convert(ctx, in, Options{}); err == nil || err.Error() != "convert standard input: stopped: terminated signal received" {
		t.Errorf("Convert with a done context: %v", err)
	}
	res, err := Convert(context.Background(), []Input{{Name: "c.yaml", Data: []byte("# only a comment\n---\n")}}, Options{})
	if err != nil || !res.Empty() {
		t.Errorf("Convert of comments = %+v, %v; want an empty result", res, err)
	}
	if res, err := Convert(context.Background(), in, Options{}); err != nil || res.Empty() {
		t.Errorf("Convert of a ConfigMap = %+v, %v; want it counted", res, err)
	}
}
