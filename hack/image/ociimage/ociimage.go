// Package ociimage builds Joiner's container image without Docker and without a registry: the
// static joiner binary for each platform, one layer holding /joiner on an empty base, an OCI image
// index over the platforms, written as an OCI image layout and as a tar of that layout (which
// `crane push`, `ctr import`, `skopeo copy oci-archive:` and `docker load` take). The same inputs
// give the same bytes: no timestamps but the commit's, no randomness. It pushes nothing; `make
// release` does, with crane.
package ociimage

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Defaults of Metadata and BinaryOptions.
const (
	// DefaultRepository is the repository the chart (charts/joiner values controller.image.repository)
	// and kustomize (config/manager images) deploy.
	DefaultRepository = "ghcr.io/joiner-dev/joiner"
	// DefaultSource is the org.opencontainers.image.source label.
	DefaultSource = "https://github.com/joiner-dev/joiner"
	// DefaultLicenses is the org.opencontainers.image.licenses label: the SPDX "no assertion",
	// because the repository declares no license yet.
	DefaultLicenses = "NOASSERTION"
	// DefaultPackage is the Go package of the binary, relative to the module root.
	DefaultPackage = "./cmd/joiner"
	// FallbackVersion is the version when git cannot describe the tree (no git, not a checkout).
	FallbackVersion = "0.0.0-dev"
	// UnknownCommit is the commit when git cannot name HEAD.
	UnknownCommit = "unknown"
	// Title is the org.opencontainers.image.title label.
	Title = "joiner"
)

// The image's runtime configuration.
const (
	// BinaryPath is where the binary lives in the image: the only file of its one layer.
	BinaryPath = "/joiner"
	// User is the uid:gid the image runs as: the chart's and kustomize's runAsUser and runAsGroup.
	User = "65532:65532"
)

// Entrypoint and Cmd make `docker run IMAGE` run `joiner controller`. A Pod's args replace Cmd
// and keep Entrypoint, so the Deployment's `args: [controller, --flag...]` runs
// `/joiner controller --flag...`, and `docker run IMAGE version` runs `joiner version`.
var (
	Entrypoint = []string{BinaryPath}
	Cmd        = []string{"controller"}
)

// The OCI annotation keys the image carries as labels (image-spec annotations.md).
const (
	LabelSource   = "org.opencontainers.image.source"
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
	LabelLicenses = "org.opencontainers.image.licenses"
	// RefNameAnnotation names the index in the layout's index.json (the tag; skopeo and crane read it).
	RefNameAnnotation = "org.opencontainers.image.ref.name"
	// ContainerdNameAnnotation is the full reference `ctr import` names the image by.
	ContainerdNameAnnotation = "io.containerd.image.name"
)

// Metadata is what one build is: it is stamped into the binary (`joiner version`, the
// joiner_build_info metric) and becomes the image's labels and reference.
type Metadata struct {
	// Repository is the image repository without a tag (DefaultRepository).
	Repository string
	// Version is the image tag and the binary's version, such as 0.1.0 or 0.1.0-3-gabc1234-dirty.
	Version string
	// Commit is the full git commit the binary is built from.
	Commit string
	// Created is when the image counts as created: the layer's file times, the config's created
	// and the created label. The commit's date keeps rebuilds of one commit identical; zero
	// means the Unix epoch.
	Created time.Time
	// Source and Licenses are the labels of the same name (DefaultSource, DefaultLicenses).
	Source, Licenses string
}

// withDefaults fills the empty fields with the package defaults (Version and Commit included:
// FallbackVersion and UnknownCommit; Created: the Unix epoch).
func (m Metadata) withDefaults() Metadata {
	m.Repository = orDefault(m.Repository, DefaultRepository)
	m.Version = orDefault(m.Version, FallbackVersion)
	m.Commit = orDefault(m.Commit, UnknownCommit)
	m.Source = orDefault(m.Source, DefaultSource)
	m.Licenses = orDefault(m.Licenses, DefaultLicenses)
	if m.Created.IsZero() {
		m.Created = time.Unix(0, 0) // as ko does: reproducible, and plainly not a real date
	}
	m.Created = m.Created.UTC()
	return m
}

// tagPattern is the grammar of an image tag (distribution spec); a version outside it could not
// be pushed, and could break the -ldflags it is stamped with.
var tagPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// repositoryPattern is a lowercase registry/path repository name, without tag or digest.
var repositoryPattern = regexp.MustCompile(`^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)+$`)

// commitPattern is a git object name (SHA-1 or SHA-256), or UnknownCommit.
var commitPattern = regexp.MustCompile(`^([0-9a-f]{7,64}|` + UnknownCommit + `)$`)

// Validate reports a field that cannot be a tag, a repository or a commit, naming the flag that
// sets it. Empty fields stand for their defaults.
func (m Metadata) Validate() error {
	m = m.withDefaults()
	if !repositoryPattern.MatchString(m.Repository) {
		return fmt.Errorf("--repository %q: want a lowercase registry/path such as %s, without tag or digest", m.Repository, DefaultRepository)
	}
	if !tagPattern.MatchString(m.Version) {
		return fmt.Errorf("--version %q is not a valid image tag: use letters, digits, '_', '.' and '-' (at most 128, not starting with '.' or '-')", m.Version)
	}
	if !commitPattern.MatchString(m.Commit) {
		return fmt.Errorf("--commit %q: want a git commit in lowercase hex (git rev-parse HEAD) or %q", m.Commit, UnknownCommit)
	}
	return nil
}

// Reference is the image reference a build is tagged with: Repository:Version.
func (m Metadata) Reference() string { return m.Repository + ":" + m.Version }

// Labels are the image's OCI labels, also set as the index's annotations.
func (m Metadata) Labels() map[string]string {
	return map[string]string{
		LabelSource:   m.Source,
		LabelVersion:  m.Version,
		LabelRevision: m.Commit,
		LabelCreated:  m.Created.UTC().Format(time.RFC3339),
		LabelTitle:    Title,
		LabelLicenses: m.Licenses,
	}
}

// Platform is an operating system and CPU architecture, as OCI names them.
type Platform struct {
	OS, Architecture string
}

// String is os/architecture, as in --platforms.
func (p Platform) String() string { return p.OS + "/" + p.Architecture }

// DefaultPlatforms are the platforms `make image` builds.
var DefaultPlatforms = []Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// ParsePlatforms parses a comma-separated list of os/architecture pairs, such as
// linux/amd64,linux/arm64. Only linux is accepted: the image has no Windows or macOS form.
func ParsePlatforms(s string) ([]Platform, error) {
	var out []Platform
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		os, arch, ok := strings.Cut(item, "/")
		if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("--platforms: %q is not os/architecture, such as linux/arm64", item)
		}
		if os != "linux" {
			return nil, fmt.Errorf("--platforms: %q: only linux images are built", item)
		}
		p := Platform{OS: os, Architecture: arch}
		for _, seen := range out {
			if seen == p {
				return nil, fmt.Errorf("--platforms: %s is listed twice", p)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
