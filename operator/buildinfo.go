package operator

import (
	"fmt"
	"runtime"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/metrics"
)

// BuildInfo is what the binary was built from, as stamped by -ldflags (hack/image).
type BuildInfo struct {
	// Version is the release or `git describe` of the build; empty means "dev".
	Version string
	// Commit is the git commit; empty means "unknown".
	Commit string
}

// registerBuildInfo registers joiner_build_info{version, goversion, goarch, commit}, always 1:
// Karpenter's karpenter_build_info with its labels, in Joiner's namespace because the version is
// Joiner's, not Karpenter's.
func registerBuildInfo(reg prometheus.Registerer, bi BuildInfo) error {
	r := metrics.NewRegistrar(reg)
	g := metrics.Add(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metrics.Joiner, Name: "build_info",
		Help: "A metric with a constant '1' value labeled by version from which joiner was built, and the Go version, architecture and commit."},
		[]string{"version", "goversion", "goarch", "commit"}))
	if err := r.Err(); err != nil {
		return fmt.Errorf("build info metric: %w", err)
	}
	g.WithLabelValues(orDefault(bi.Version, "dev"), runtime.Version(), runtime.GOARCH, orDefault(bi.Commit, "unknown")).Set(1)
	return nil
}
