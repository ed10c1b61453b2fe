package config_test

import (
	"debug/buildinfo"
	"debug/elf"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/joiner-dev/joiner/hack/image/ociimage"
)

// TestImageIsWhatTheManifestsDeploy builds the image as `make image` does (hack/image/ociimage:
// both platforms, the real cmd/joiner, a version stamped with -ldflags) and checks it against the
// Deployment that the chart and kustomize render: the same reference, the user they run as, an
// argv that runs `joiner controller` with flags the binary accepts. The binary taken out of the
// amd64 layer runs and prints the stamped version; the arm64 one is a static arm64 executable.
func TestImageIsWhatTheManifestsDeploy(t *testing.T) {
	// The chart deploys its appVersion: a release is built at that version (`make release` checks).
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	decodeYAMLFile(t, filepath.Join(repoRoot, ociimage.ChartFile), &chart)
	m := ociimage.Metadata{Version: chart.AppVersion, Commit: "0123456789abcdef0123456789abcdef01234567",
		Created: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)}
	// The first run compiles cmd/joiner for both platforms with -trimpath (minutes on two cores);
	// later runs find the packages in the build cache and only link.
	start := time.Now()
	res, err := ociimage.Build(t.Context(), ociimage.Options{Metadata: m, BinaryOptions: ociimage.BinaryOptions{Dir: repoRoot}, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s in %s", res.Metadata.Reference(), time.Since(start).Round(time.Second))
	for _, p := range res.Platforms {
		t.Logf("%s: compressed layer %d bytes (%.1f MiB), binary %.1f MiB", p.Platform, p.LayerBytes, float64(p.LayerBytes)/(1<<20), float64(p.BinaryBytes)/(1<<20))
	}
	idx, names, err := ociimage.ReadLayout(res.Layout)
	if err != nil {
		t.Fatal(err)
	}
	images, err := ociimage.Images(idx)
	if err != nil {
		t.Fatal(err)
	}
	binaries := checkImages(t, images, m)
	amd64 := binaries["amd64"]
	if amd64 == "" {
		t.Fatal("no linux/amd64 binary in the image")
	}
	want := "joiner " + chart.AppVersion + " (commit " + m.Commit + ", "
	if out := run(t, nil, amd64, "version"); !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "linux/amd64") {
		t.Errorf("`joiner version` of the image's binary printed %q, want %q... linux/amd64", out, want)
	}
	renderings := []struct {
		name string
		m    manifest
	}{
		// settings.clusterName: the chart renders the provider it selects, with its flags.
		{name: "helm", m: parse(t, helmTemplate(t, defaultNamespace, "--set", "settings.clusterName=image-test"))},
		{name: "kustomize", m: parse(t, kustomize(t, "config/default"))},
	}
	for _, r := range renderings {
		t.Run(r.name, func(t *testing.T) {
			var d appsv1.Deployment
			decode(t, r.m.get(t, "Deployment", deploymentName), &d)
			checkDeployedImage(t, d.Spec.Template.Spec, names[ociimage.ContainerdNameAnnotation], amd64)
		})
	}
}

// checkImages asserts each platform's image config and layer, and returns the binaries taken out
// of the layers by architecture.
func checkImages(t *testing.T, images []ociimage.PlatformImage, m ociimage.Metadata) map[string]string {
	t.Helper()
	binaries := map[string]string{}
	var platforms []ociimage.Platform
	for _, pi := range images {
		p := pi.Platform
		platforms = append(platforms, p)
		cf, err := pi.Image.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cf.Config
		if cf.OS != p.OS || cf.Architecture != p.Architecture {
			t.Errorf("%s: config says %s/%s", p, cf.OS, cf.Architecture)
		}
		if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/joiner"}) || !slices.Equal(c.Cmd, []string{"controller"}) {
			t.Errorf("%s: user %q entrypoint %q cmd %q; want 65532:65532, [/joiner], [controller]", p, c.User, c.Entrypoint, c.Cmd)
		}
		for _, k := range []string{ociimage.LabelSource, ociimage.LabelVersion, ociimage.LabelRevision, ociimage.LabelCreated, ociimage.LabelTitle, ociimage.LabelLicenses} {
			if c.Labels[k] == "" {
				t.Errorf("%s: no label %s", p, k)
			}
		}
		if c.Labels[ociimage.LabelVersion] != m.Version || c.Labels[ociimage.LabelRevision] != m.Commit {
			t.Errorf("%s: version and revision labels %q %q, want %q %q", p, c.Labels[ociimage.LabelVersion], c.Labels[ociimage.LabelRevision], m.Version, m.Commit)
		}
		bin := filepath.Join(t.TempDir(), "joiner-"+p.Architecture)
		files, err := ociimage.ExtractBinary(pi.Image, bin)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != 1 || files[0].Mode != 0o755 || files[0].Uid != 0 {
			t.Errorf("%s: layer entries %+v, want /joiner alone, mode 0755, owned by root", p, files)
		}
		checkStaticELF(t, bin, p.Architecture)
		checkBuildSettings(t, bin, p.Architecture)
		binaries[p.Architecture] = bin
	}
	if !slices.Equal(platforms, ociimage.DefaultPlatforms) {
		t.Errorf("image platforms %v, want %v", platforms, ociimage.DefaultPlatforms)
	}
	return binaries
}

// checkStaticELF asserts that path is a Linux executable for arch needing no interpreter or
// shared library: it runs in an image with nothing else in it.
func checkStaticELF(t *testing.T, path, arch string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", arch, err)
	}
	defer func() { _ = f.Close() }()
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[arch]
	if f.Machine != wantMachine {
		t.Errorf("%s: the binary is for %s, want %s", arch, f.Machine, wantMachine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s: the binary needs a dynamic loader: not built with CGO_ENABLED=0", arch)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s: the binary links %v", arch, libs)
	}
}

// checkBuildSettings asserts what the Go toolchain recorded in the binary: built with -trimpath and
// CGO_ENABLED=0, and with the root certificates compiled in (golang.org/x/crypto/x509roots/fallback),
// since the image has no /etc/ssl.
func checkBuildSettings(t *testing.T, path, arch string) {
	t.Helper()
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: read the Go build information: %v", arch, err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["-trimpath"] != "true" || settings["CGO_ENABLED"] != "0" || settings["GOARCH"] != arch {
		t.Errorf("%s: built with -trimpath=%q CGO_ENABLED=%q GOARCH=%q; want true, 0, %s", arch, settings["-trimpath"], settings["CGO_ENABLED"], settings["GOARCH"], arch)
	}
	if !slices.ContainsFunc(bi.Deps, func(m *debug.Module) bool { return m.Path == "golang.org/x/crypto/x509roots/fallback" }) {
		t.Errorf("%s: golang.org/x/crypto/x509roots/fallback is not compiled in: TLS would find no root certificates in the image", arch)
	}
}

// checkDeployedImage asserts the controller container of a rendered pod spec against the image
// tagged ref whose amd64 binary is bin.
func checkDeployedImage(t *testing.T, ps corev1.PodSpec, ref, bin string) {
	t.Helper()
	c := ps.Containers[0]
	if c.Image != ref {
		t.Errorf("the Deployment runs image %q; `make image` at the chart's appVersion tags %q", c.Image, ref)
	}
	// The container's securityContext wins over the pod's.
	var uid, gid int64
	for _, sc := range []*corev1.SecurityContext{podLevel(ps.SecurityContext), c.SecurityContext} {
		if sc != nil && sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc != nil && sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
	}
	if uid != 65532 || gid != 65532 {
		t.Errorf("the Deployment runs as %d:%d, the image as %s", uid, gid, ociimage.User)
	}
	// Kubernetes: a command replaces the image's Entrypoint and drops its Cmd; args replace Cmd.
	entrypoint, cmd := ociimage.Entrypoint, ociimage.Cmd
	if len(c.Command) > 0 {
		entrypoint, cmd = c.Command, nil
	}
	if len(c.Args) > 0 {
		cmd = c.Args
	}
	argv := append(slices.Clone(entrypoint), cmd...)
	if len(argv) < 2 || argv[0] != ociimage.BinaryPath || argv[1] != "controller" || slices.Index(argv[2:], "controller") >= 0 {
		t.Fatalf("the container runs %q; want %s controller [flags]", argv, ociimage.BinaryPath)
	}
	// The binary parses the rendered flags: --help after them stops before any cluster is needed,
	// and an unknown or malformed flag before it fails with exit status 2.
	if _, stderr, err := tryRun(nil, bin, append(argv[1:], "--help")...); err != nil {
		t.Errorf("the image's joiner refuses the Deployment's arguments %q: %v\n%s", argv[1:], err, stderr)
	}
}

// podLevel is the part of a pod's security context that a container's may override.
func podLevel(p *corev1.PodSecurityContext) *corev1.SecurityContext {
	if p == nil {
		return nil
	}
	return &corev1.SecurityContext{RunAsUser: p.RunAsUser, RunAsGroup: p.RunAsGroup}
}

func decodeYAMLFile(t *testing.T, path string, into any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}
