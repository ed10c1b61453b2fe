package ociimage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestBuild runs the whole build on a small main package standing in for cmd/joiner (the real one
// is built by config/image_test.go): the version and commit reach the binary through -ldflags, the
// outputs are where the Makefile and `make release` look, and an earlier version's archive is gone.
func TestBuild(t *testing.T) {
	module := t.TempDir()
	writeFile(t, filepath.Join(module, "go.mod"), "module example.com/stamped\n\ngo 1.26\n")
	writeFile(t, filepath.Join(module, "main.go"), "package main\n\nimport \"fmt\"\n\nvar version, commit = \"dev\", \"unknown\"\n\n"+
		"func main() { fmt.Println(version, commit) }\n")
	out := t.TempDir()
	stale := filepath.Join(out, ArchiveName("0.0.1"))
	writeFile(t, stale, "an earlier build")
	host := Platform{OS: "linux", Architecture: runtime.GOARCH}
	m := Metadata{Version: "1.2.3-rc.1", Commit: "0123abc", Created: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	res, err := Build(context.Background(), Options{Metadata: m, BinaryOptions: BinaryOptions{Dir: module, Package: "."},
		Platforms: []Platform{host}, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := exec.Command(res.Platforms[0].Binary).Output(); err != nil || string(got) != "1.2.3-rc.1 0123abc\n" {
		t.Errorf("the built binary printed %q (%v), want the stamped version and commit", got, err)
	}
	if got := strings.TrimSpace(string(readAll(t, filepath.Join(out, ReferenceFile)))); got != DefaultRepository+":1.2.3-rc.1" {
		t.Errorf("reference file holds %q", got)
	}
	if res.Archive != filepath.Join(out, "joiner-1.2.3-rc.1.oci.tar") || res.Layout != filepath.Join(out, LayoutDir) {
		t.Errorf("archive %s, layout %s", res.Archive, res.Layout)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the earlier version's archive is still there (%v)", err)
	}
	pr := res.Platforms[0]
	if pr.Platform != host || pr.LayerBytes <= 0 || pr.LayerBytes >= pr.BinaryBytes {
		t.Errorf("platform result %+v: want a compressed layer smaller than the binary", pr)
	}
	idx, _, err := ReadLayout(res.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d != res.Index {
		t.Errorf("layout's index %s, result says %s", d, res.Index)
	}
	var summary strings.Builder
	if err := res.Summary(&summary); err != nil || !strings.Contains(summary.String(), "linux/"+runtime.GOARCH+"  layer ") {
		t.Errorf("summary %q (%v)", summary.String(), err)
	}
}
