package admissioncheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/joiner-dev/joiner/admissioncheck"
)

// warnPolicy warns with a message far longer than the 120 characters warnings were once cut at.
const warnPolicy = `apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata: {name: team-label}
spec:
  enforcementAction: Warn
  match: {kinds: [NodePool]}
  rego: |
    package test.teamlabel

    violation contains {"msg": "NodePool has no joiner.dev/team label; every NodePool must name the team that owns it so that costs and incidents reach that team", "field": "metadata.labels"} if {
    	not input.review.object.metadata.labels["joiner.dev/team"]
    }
`

// longWarning is the warning of warnPolicy, whole.
const longWarning = "[team-label] NodePool has no joiner.dev/team label; every NodePool must name the team that owns it so that costs and incidents reach that team (field: metadata.labels)"

// reportFixture writes a folder with an allowed NodePool (with a warning) at line 6 of pools.yaml, a
// denied one at line 19, a legacy Provisioner and a ConfigMap, and returns the folder and the policy file.
func reportFixture(t *testing.T) (string, string) {
	t.Helper()
	heavy := localNodePool("heavy", "", "  weight: 0\n")
	dir := writeFiles(t, map[string]string{
		"policies.yaml": warnPolicy,
		"m/pools.yaml": "# the team's pools\n" + localClass + "---\n# comment before the pool\n" + localNodePool("ok", "", "") +
			"---\n" + heavy,
		"m/legacy.yaml": "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: old}\n",
		"m/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: shop}\n",
	})
	return filepath.Join(dir, "m"), filepath.Join(dir, "policies.yaml")
}

func runFormat(t *testing.T, output string, cfg admissioncheck.Config) (string, int) {
	t.Helper()
	cfg.Output = output
	var out bytes.Buffer
	code, err := admissioncheck.Run(context.Background(), cfg, &out)
	if err != nil {
		t.Fatalf("-o %s: %v", output, err)
	}
	return out.String(), code
}

func TestReportFormats(t *testing.T) {
	folder, policies := reportFixture(t)
	pools := filepath.Join(folder, "pools.yaml")
	legacy := filepath.Join(folder, "legacy.yaml")
	cfg := admissioncheck.Config{ObjectPaths: []string{folder}, PolicyPath: policies}
	tests := []struct {
		output string
		want   []string
		check  func(t *testing.T, out string)
	}{
		{output: admissioncheck.OutputHuman, want: []string{
			legacy + "#1 Provisioner/old: error karpenter.sh/v1alpha5 Provisioner is not served; run `joiner convert`\n",
			pools + "#2 NodePool/ok: warn " + longWarning + "\n",
			pools + "#3 NodePool/heavy: deny spec.weight: Invalid value: 0",
			"checked 5 objects against 1 policies: 2 allowed, 2 denied, 1 skipped, 1 warnings\n",
		}},
		{output: admissioncheck.OutputJSON, check: checkJSON(pools)},
		{output: admissioncheck.OutputJUnit, want: []string{
			`<testsuite name="` + pools + `" tests="3" failures="1" errors="0" skipped="0">`,
			`<testcase name="NodePool/heavy" classname="` + pools + `#3">`,
			`<skipped message="v1 ConfigMap is not a kind Joiner judges (--strict-kinds makes it an error)">`,
			`<system-out>warn ` + strings.ReplaceAll(longWarning, `'`, `&#39;`) + `</system-out>`,
		}, check: checkJUnit},
		{output: admissioncheck.OutputSARIF, check: checkSARIF(pools, legacy)},
		{output: admissioncheck.OutputGitHub, want: []string{
			"::error file=" + legacy + ",line=1,title=Provisioner/old kind::karpenter.sh/v1alpha5 Provisioner is not served; run `joiner convert`\n",
			"::warning file=" + pools + ",line=6,title=NodePool/ok team-label::" + longWarning + "\n",
			"::error file=" + pools + ",line=19,title=NodePool/heavy apiserver::spec.weight: Invalid value: 0",
		}},
		{output: admissioncheck.OutputGitLab, check: checkGitLab(pools)},
	}
	for _, tt := range tests {
		t.Run(tt.output, func(t *testing.T) {
			out, code := runFormat(t, tt.output, cfg)
			if code != admissioncheck.ExitDenied {
				t.Errorf("exit code %d, want %d", code, admissioncheck.ExitDenied)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}

func checkJSON(pools string) func(t *testing.T, out string) {
	return func(t *testing.T, out string) {
		var rep admissioncheck.Report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		byName := map[string]admissioncheck.Result{}
		for _, o := range rep.Objects {
			byName[o.Name] = o
		}
		if ok := byName["ok"]; ok.File != pools || ok.Line != 6 || len(ok.Problems) != 1 || ok.Problems[0].Policy != "team-label" || ok.Problems[0].Message != longWarning {
			t.Errorf("ok = %+v", ok)
		}
		if heavy := byName["heavy"]; heavy.Line != 19 || heavy.Allowed {
			t.Errorf("heavy = %+v", heavy)
		}
		if cm := byName["settings"]; !cm.Skipped || cm.Allowed != true || cm.SkipReason == "" {
			t.Errorf("settings = %+v", cm)
		}
	}
}

func checkJUnit(t *testing.T, out string) {
	xsd, err := os.ReadFile(filepath.Join("testdata", "junit.xsd"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := parseXSD(xsd)
	if err != nil {
		t.Fatalf("read junit.xsd: %v", err)
	}
	if err := schema.validate([]byte(out)); err != nil {
		t.Errorf("JUnit output does not follow junit.xsd: %v\n%s", err, out)
	}
}

func sarifSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "sarif-schema-2.1.0.json"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("sarif-schema-2.1.0.json", doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile("sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatalf("compile the SARIF schema: %v", err)
	}
	return schema
}

func checkSARIF(pools, legacy string) func(t *testing.T, out string) {
	return func(t *testing.T, out string) {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(out))
		if err != nil {
			t.Fatalf("not JSON: %v", err)
		}
		if err := sarifSchema(t).Validate(doc); err != nil {
			t.Errorf("SARIF output does not follow the SARIF 2.1.0 schema: %v", err)
		}
		var log struct {
			Runs []struct {
				Results []struct {
					RuleID    string `json:"ruleId"`
					Level     string `json:"level"`
					Message   struct{ Text string }
					Locations []struct {
						PhysicalLocation struct {
							ArtifactLocation struct{ URI string }
							Region           struct{ StartLine int }
						}
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(out), &log); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range log.Runs[0].Results {
			loc := r.Locations[0].PhysicalLocation
			got = append(got, strings.Join([]string{r.RuleID, r.Level, loc.ArtifactLocation.URI, strings.Repeat("I", loc.Region.StartLine)}, " "))
			if r.RuleID == "team-label" && r.Message.Text != longWarning {
				t.Errorf("warning cut: %q", r.Message.Text)
			}
		}
		want := []string{"kind error " + legacy + " I", "team-label warning " + pools + " " + strings.Repeat("I", 6), "apiserver error " + pools + " " + strings.Repeat("I", 19)}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("results (rule level uri line-in-tally):\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

func checkGitLab(pools string) func(t *testing.T, out string) {
	return func(t *testing.T, out string) {
		var issues []struct {
			Description string `json:"description"`
			CheckName   string `json:"check_name"`
			Fingerprint string `json:"fingerprint"`
			Severity    string `json:"severity"`
			Location    struct {
				Path  string `json:"path"`
				Lines struct {
					Begin int `json:"begin"`
				} `json:"lines"`
			} `json:"location"`
		}
		if err := json.Unmarshal([]byte(out), &issues); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if len(issues) != 3 {
			t.Fatalf("%d issues, want 3:\n%s", len(issues), out)
		}
		seen := map[string]bool{}
		for _, is := range issues {
			if is.Description == "" || is.CheckName == "" || len(is.Fingerprint) != 64 || is.Severity == "" || is.Location.Path == "" || is.Location.Lines.Begin < 1 || seen[is.Fingerprint] {
				t.Errorf("incomplete or duplicate issue %+v", is)
			}
			seen[is.Fingerprint] = true
		}
		if w := issues[1]; w.CheckName != "team-label" || w.Severity != "minor" || w.Location.Path != pools || w.Location.Lines.Begin != 6 || !strings.HasSuffix(w.Description, longWarning) {
			t.Errorf("warning issue = %+v", w)
		}
	}
}

// TestSchemaCheckersRefuse shows the two schema checks can fail: documents that break the schemas'
// rules are refused.
func TestSchemaCheckersRefuse(t *testing.T) {
	xsd, err := os.ReadFile(filepath.Join("testdata", "junit.xsd"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := parseXSD(xsd)
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{
		"testsuite without tests":      `<testsuites><testsuite name="a"></testsuite></testsuites>`,
		"testcase without name":        `<testsuites><testsuite name="a" tests="1"><testcase/></testsuite></testsuites>`,
		"failure before skipped":       `<testsuites><testsuite name="a" tests="1"><testcase name="x"><failure/><skipped/></testcase></testsuite></testsuites>`,
		"undeclared element":           `<testsuites><suite/></testsuites>`,
		"undeclared attribute":         `<testsuites colour="red"/>`,
		"text in element-only content": `<testsuites>text</testsuites>`,
	} {
		if err := schema.validate([]byte(doc)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	bad, err := jsonschema.UnmarshalJSON(strings.NewReader(`{"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"message": {"text": "m"}, "level": "fatal"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := sarifSchema(t).Validate(bad); err == nil {
		t.Error("a SARIF result with level fatal was accepted")
	}
}
