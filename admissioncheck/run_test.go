package admissioncheck_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/joiner-dev/joiner/admissioncheck"
	"github.com/joiner-dev/joiner/policy/offline"
)

const capPolicy = `apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata: {name: cpu-cap}
spec:
  match: {kinds: [NodePool]}
  rego: |
    package test.cpucap

    violation contains {"msg": "spec.limits.cpu above 100", "field": "spec.limits.cpu"} if {
    	to_number(input.review.object.spec.limits.cpu) > 100
    }
`

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRun(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"policies/cap.yaml": capPolicy,
		"new/pools.yaml": localClass + "---\n" + localNodePool("ok", "", "") + "---\n" +
			strings.Replace(localNodePool("big", "", ""), `cpu: "10"`, `cpu: "500"`, 1) + "---\n" +
			strings.Replace(localNodePool("moving", "", ""), "kind: LocalNodeClass", "kind: OtherNodeClass", 1),
		"live/pools.yaml": localNodePool("moving", "", ""),
		"clean/pool.yaml": localClass + "---\n" + localNodePool("ok", "", ""),
	})
	tests := []struct {
		name      string
		cfg       admissioncheck.Config
		wantCode  int
		wantLines []string
		wantErr   string
	}{
		{
			name: "text, with policies and the live revision",
			cfg: admissioncheck.Config{ObjectPaths: []string{filepath.Join(dir, "new")}, OldPaths: []string{filepath.Join(dir, "live")},
				PolicyPath: filepath.Join(dir, "policies")},
			wantCode: 1,
			wantLines: []string{
				filepath.Join(dir, "new", "pools.yaml") + "#3 NodePool/big: deny [cpu-cap] spec.limits.cpu above 100 (field: spec.limits.cpu)",
				filepath.Join(dir, "new", "pools.yaml") + "#4 NodePool/moving: deny spec.template.spec.nodeClassRef: Invalid value: nodeClassRef.kind is immutable",
				"checked 4 objects against 1 policies: 2 allowed, 2 denied, 0 skipped, 0 warnings",
			},
		},
		{
			name:      "every object admitted",
			cfg:       admissioncheck.Config{ObjectPaths: []string{filepath.Join(dir, "clean")}},
			wantLines: []string{"checked 2 objects against 0 policies: 2 allowed, 0 denied, 0 skipped, 0 warnings"},
		},
		{name: "unknown output", cfg: admissioncheck.Config{ObjectPaths: []string{dir}, Output: "yaml"}, wantCode: 2, wantErr: `output "yaml" is not supported`},
		{name: "unknown field validation", cfg: admissioncheck.Config{ObjectPaths: []string{dir}, FieldValidation: "Loose"}, wantCode: 2, wantErr: `field validation "Loose" is not supported`},
		{name: "no manifests", cfg: admissioncheck.Config{}, wantCode: 2, wantErr: "no manifests to check"},
		{name: "empty folder", cfg: admissioncheck.Config{ObjectPaths: []string{t.TempDir()}}, wantCode: 2, wantErr: "no Kubernetes objects found"},
		{name: "no policy in the policy folder", cfg: admissioncheck.Config{ObjectPaths: []string{filepath.Join(dir, "clean")}, PolicyPath: filepath.Join(dir, "clean")}, wantCode: 2, wantErr: "no ProvisioningPolicy found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			code, err := admissioncheck.Run(context.Background(), tt.cfg, &out)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\n%s", code, tt.wantCode, out.String())
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range tt.wantLines {
				if !strings.Contains(out.String(), l+"\n") {
					t.Errorf("output lacks the line\n%s\n---\n%s", l, out.String())
				}
			}
		})
	}
}

func TestRunJSON(t *testing.T) {
	dir := writeFiles(t, map[string]string{"pools.yaml": localClass + "---\n" + localNodePool("heavy", "", "  weight: 101\n")})
	var out bytes.Buffer
	code, err := admissioncheck.Run(context.Background(), admissioncheck.Config{ObjectPaths: []string{dir}, Output: admissioncheck.OutputJSON}, &out)
	if err != nil || code != 1 {
		t.Fatalf("code %d, err %v; want 1 and no error", code, err)
	}
	var rep admissioncheck.Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	got := rep.Objects[1]
	if got.Allowed || got.Kind != "NodePool" || got.Name != "heavy" || len(got.Problems) != 1 || got.Problems[0].Field != "spec.weight" {
		t.Errorf("result = %+v", got)
	}
	if rep.Summary != (admissioncheck.Summary{Objects: 2, Allowed: 1, Denied: 1}) {
		t.Errorf("summary = %+v", rep.Summary)
	}
}

func TestPair(t *testing.T) {
	np := func(apiVersion, name string) map[string]any {
		return map[string]any{"apiVersion": apiVersion, "kind": "NodePool", "metadata": map[string]any{"name": name}}
	}
	old := []offline.Object{{Source: "live", Content: np("karpenter.sh/v1", "a")}}
	items := admissioncheck.Pair([]offline.Object{
		{Source: "same", Content: np("karpenter.sh/v1", "a")},
		{Source: "other version, same group", Content: np("karpenter.sh/v2", "a")},
		{Source: "other name", Content: np("karpenter.sh/v1", "b")},
	}, old)
	for i, want := range []bool{true, true, false} {
		if got := items[i].Old != nil; got != want {
			t.Errorf("%s: paired = %v, want %v", items[i].Source, got, want)
		}
	}
}
