package ociimage

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParsePlatforms(t *testing.T) {
	tests := []struct {
		in      string
		want    []Platform
		wantErr string
	}{
		{in: "linux/amd64,linux/arm64", want: DefaultPlatforms},
		{in: " linux/arm64 ", want: []Platform{{OS: "linux", Architecture: "arm64"}}},
		{in: "linux", wantErr: `"linux" is not os/architecture`},
		{in: "linux/arm64/v8", wantErr: `"linux/arm64/v8" is not os/architecture`},
		{in: "linux/amd64,", wantErr: `"" is not os/architecture`},
		{in: "windows/amd64", wantErr: "only linux images are built"},
		{in: "linux/amd64,linux/amd64", wantErr: "linux/amd64 is listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePlatforms(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestMetadataValidate(t *testing.T) {
	valid := Metadata{Version: "0.1.0", Commit: strings.Repeat("a", 40)}.withDefaults()
	tests := []struct {
		name    string
		edit    func(*Metadata)
		wantErr string
	}{
		{name: "valid", edit: func(*Metadata) {}},
		{name: "git describe of an untagged dirty tree", edit: func(m *Metadata) { m.Version = "c6b868e-dirty" }},
		{name: "defaults", edit: func(m *Metadata) { *m = Metadata{}.withDefaults() }},
		{name: "version with a space", edit: func(m *Metadata) { m.Version = "1.0 -X main.x=y" }, wantErr: `--version "1.0 -X main.x=y" is not a valid image tag`},
		{name: "version with a plus", edit: func(m *Metadata) { m.Version = "1.0.0+build" }, wantErr: "is not a valid image tag"},
		{name: "version starting with a dot", edit: func(m *Metadata) { m.Version = ".1" }, wantErr: "is not a valid image tag"},
		{name: "repository with a tag", edit: func(m *Metadata) { m.Repository = "ghcr.io/joiner-dev/joiner:1" }, wantErr: "--repository"},
		{name: "repository in capitals", edit: func(m *Metadata) { m.Repository = "ghcr.io/Joiner" }, wantErr: "lowercase"},
		{name: "registry with a port", edit: func(m *Metadata) { m.Repository = "localhost:5000/joiner" }},
		{name: "commit not hex", edit: func(m *Metadata) { m.Commit = "HEAD" }, wantErr: `--commit "HEAD"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := valid
			tt.edit(&m)
			err := m.Validate()
			if tt.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestMetadataDefaultsAndLabels(t *testing.T) {
	m := Metadata{}.withDefaults()
	if m.Reference() != DefaultRepository+":"+FallbackVersion || m.Commit != UnknownCommit || !m.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("defaults = %+v, want %s:%s, commit %s, the Unix epoch", m, DefaultRepository, FallbackVersion, UnknownCommit)
	}
	created := time.Date(2026, 11, 28, 10, 30, 0, 0, time.FixedZone("CET", 3600))
	got := Metadata{Version: "0.1.0", Commit: "abc1234", Created: created}.withDefaults().Labels()
	want := map[string]string{
		LabelSource: DefaultSource, LabelVersion: "0.1.0", LabelRevision: "abc1234",
		LabelCreated: "2026-11-28T09:30:00Z", LabelTitle: "joiner", LabelLicenses: DefaultLicenses,
	}
	if len(got) != len(want) {
		t.Errorf("labels %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q", k, got[k], v)
		}
	}
}

// TestFromGit reads the version, commit and date of a real git checkout, as `make image` does.
func TestFromGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatal("git is not on PATH; `make image` needs it to name the version")
	}
	ctx := context.Background()
	dir := t.TempDir()
	gitRun := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_COMMITTER_DATE=2026-03-04T05:06:07Z", "GIT_AUTHOR_DATE=2026-03-04T05:06:07Z")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	// Not a checkout: nothing is filled in, and the defaults apply.
	if got := FromGit(ctx, dir, Metadata{}).withDefaults(); got.Version != FallbackVersion || got.Commit != UnknownCommit {
		t.Errorf("outside a checkout: %+v, want %s and %s", got, FallbackVersion, UnknownCommit)
	}
	gitRun("init", "-q")
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("1"), 0o600); err != nil {
		t.Fatal(err)
	}
	gitRun("add", "f")
	gitRun("commit", "-q", "-m", "one")
	gitRun("tag", "v1.2.3")
	head := gitRun("rev-parse", "HEAD")
	wantCreated := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

	got := FromGit(ctx, dir, Metadata{})
	if got.Version != "1.2.3" || got.Commit != head || !got.Created.Equal(wantCreated) {
		t.Errorf("tagged checkout: %+v, want version 1.2.3 (the tag without its v), commit %s, created %s", got, head, wantCreated)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("2"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := FromGit(ctx, dir, Metadata{}); got.Version != "1.2.3-dirty" {
		t.Errorf("modified checkout: version %q, want 1.2.3-dirty", got.Version)
	}
	given := Metadata{Version: "9.9.9", Commit: "abcdef0", Created: time.Unix(1, 0)}
	if got := FromGit(ctx, dir, given); got != given {
		t.Errorf("given fields were replaced: %+v, want %+v", got, given)
	}
}

func TestBuildBinaryReportsTheFailure(t *testing.T) {
	err := BuildBinary(context.Background(), BinaryOptions{Dir: t.TempDir(), Package: "./nothing"},
		Platform{OS: "linux", Architecture: "arm64"}, Metadata{}.withDefaults(), filepath.Join(t.TempDir(), "out"))
	if err == nil || !strings.Contains(err.Error(), "build the binary for linux/arm64") || !strings.Contains(err.Error(), "-trimpath") {
		t.Fatalf("error %v, want one naming the platform and the go build command", err)
	}
}

func TestCheckRelease(t *testing.T) {
	commit := strings.Repeat("c", 40)
	tests := []struct {
		name          string
		m             Metadata
		chart, kustom string
		wantErr       string
	}{
		{name: "release", m: Metadata{Version: "0.2.0", Commit: commit}, chart: "0.2.0", kustom: "0.2.0"},
		{name: "dirty", m: Metadata{Version: "0.2.0-dirty", Commit: commit}, chart: "0.2.0", kustom: "0.2.0", wantErr: "is not a release: release from a clean git checkout"},
		{name: "no git", m: Metadata{}, chart: "0.2.0", kustom: "0.2.0", wantErr: `version "0.0.0-dev"`},
		{name: "chart behind", m: Metadata{Version: "0.3.0", Commit: commit}, chart: "0.2.0", kustom: "0.3.0",
			wantErr: `charts/joiner/Chart.yaml has appVersion "0.2.0", but the release is "0.3.0"`},
		{name: "kustomize behind", m: Metadata{Version: "0.3.0", Commit: commit}, chart: "0.3.0", kustom: "latest",
			wantErr: `config/manager/kustomization.yaml sets the tag of ghcr.io/joiner-dev/joiner to "latest"`},
		{name: "kustomize without the image", m: Metadata{Version: "0.3.0", Commit: commit}, chart: "0.3.0", wantErr: "has no images entry named ghcr.io/joiner-dev/joiner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			writeFile(t, filepath.Join(root, ChartFile), "apiVersion: v2\nname: joiner\nversion: 0.1.0\nappVersion: \""+tt.chart+"\"\n")
			images := "images: []\n"
			if tt.kustom != "" {
				images = "images:\n  - name: other.example/x\n    newTag: old\n  - name: " + DefaultRepository + "\n    newTag: " + tt.kustom + "\n"
			}
			writeFile(t, filepath.Join(root, KustomizationFile), "kind: Kustomization\n"+images)
			err := CheckRelease(tt.m, root)
			if tt.wantErr == "" && err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
