package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/joiner-dev/joiner"

// TestModuleLayering checks the whole module's non-test imports against Rank and ControllerPackages.
func TestModuleLayering(t *testing.T) {
	pkgs := listModule(t)
	if len(pkgs) < 50 {
		t.Fatalf("go list found %d packages; expected the whole module", len(pkgs))
	}
	for _, v := range Check(pkgs) {
		t.Error(v)
	}
}

func listModule(t *testing.T) []Package {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list output: %v", err)
		}
		pkg := Package{Path: rel(p.ImportPath)}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, module+"/") {
				pkg.Imports = append(pkg.Imports, rel(imp))
			}
		}
		pkgs = append(pkgs, pkg)
	}
	return pkgs
}

func rel(path string) string { return strings.TrimPrefix(path, module+"/") }

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		pkg  Package
		want []string // the Reason prefixes expected, in order
	}{
		{"same folder", Package{"controllers/disruption", []string{"controllers/disruption/planner"}}, nil},
		{"downward", Package{"webhooks", []string{"policy", "api/karpenter/v1"}}, nil},
		{"seam to provider", Package{"cloudprovider", []string{"providers/aws"}}, []string{"cloudprovider (rank 2)"}},
		{"peer", Package{"webhooks", []string{"controllers/disruption/budget"}}, []string{"webhooks (rank 3)"}},
		{"controller to provider", Package{"controllers/audit", []string{"providers/local"}}, []string{"controllers (rank 3)"}},
		{"provider to controller library", Package{"providers/aws/interruption", []string{"controllers/fieldindex"}}, nil},
		{"unranked folder", Package{"newfolder", []string{"api"}}, []string{`folder "newfolder"`}},
		{"controller to controller", Package{"controllers/drift", []string{"controllers/nodepool"}}, []string{"a controller package"}},
		{"controller library", Package{"controllers/disruption/planner", []string{"controllers/provisioning/scheduling"}}, nil},
		{"own subpackage", Package{"controllers/provisioning/scheduling", []string{"controllers/provisioning"}}, nil},
		{"wiring", Package{"controllers", []string{"controllers/nodepool"}}, nil},
		{"operator", Package{"operator", []string{"controllers/nodepool"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check([]Package{tt.pkg})
			if len(got) != len(tt.want) {
				t.Fatalf("Check = %v, want %d violations", got, len(tt.want))
			}
			for i, v := range got {
				if !strings.HasPrefix(v.Reason, tt.want[i]) {
					t.Errorf("violation %d = %q, want a reason starting %q", i, v.Reason, tt.want[i])
				}
			}
		})
	}
}
