package ociimage

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Where the deployed image tag is written, relative to the repository root.
const (
	ChartFile         = "charts/joiner/Chart.yaml"
	KustomizationFile = "config/manager/kustomization.yaml"
)

// CheckRelease says whether m may be pushed as a release from the repository at root: built from a
// clean tree, and the version the chart (its appVersion) and kustomize (config/manager's images
// entry) deploy, so that a release is what installing it pulls.
func CheckRelease(m Metadata, root string) error {
	m = m.withDefaults()
	if strings.HasSuffix(m.Version, "-dirty") || m.Version == FallbackVersion || m.Commit == UnknownCommit {
		return fmt.Errorf("version %q (commit %s) is not a release: release from a clean git checkout (every change committed), at the tag v<version> or with VERSION=<version>", m.Version, m.Commit)
	}
	var chart struct {
		AppVersion string `json:"appVersion"`
	}
	if err := readYAML(filepath.Join(root, ChartFile), &chart); err != nil {
		return err
	}
	if chart.AppVersion != m.Version {
		return fmt.Errorf("%s has appVersion %q, but the release is %q: the chart would deploy another image; set appVersion to %q (and bump the chart's version)", ChartFile, chart.AppVersion, m.Version, m.Version)
	}
	var k struct {
		Images []struct {
			Name    string `json:"name"`
			NewName string `json:"newName"`
			NewTag  string `json:"newTag"`
		} `json:"images"`
	}
	if err := readYAML(filepath.Join(root, KustomizationFile), &k); err != nil {
		return err
	}
	for _, img := range k.Images {
		if img.Name != DefaultRepository {
			continue
		}
		if img.NewTag != m.Version {
			return fmt.Errorf("%s sets the tag of %s to %q, but the release is %q: set newTag to %q", KustomizationFile, img.Name, img.NewTag, m.Version, m.Version)
		}
		return nil
	}
	return fmt.Errorf("%s has no images entry named %s: add one with newTag %q", KustomizationFile, DefaultRepository, m.Version)
}

func readYAML(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if err := yaml.Unmarshal(data, into); err != nil {
		return fmt.Errorf("parse %s: %w", path, err)
	}
	return nil
}
