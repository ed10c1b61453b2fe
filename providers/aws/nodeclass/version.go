package nodeclass

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"k8s.io/client-go/discovery"
	"k8s.io/utils/clock"
)

// versionTTL is how long the apiserver's version is remembered.
const versionTTL = 5 * time.Minute

// VersionFromDiscovery returns an Options.KubernetesVersion that asks the apiserver for its
// version ("1.36") and remembers it for five minutes. A nil clock means the real clock.
func VersionFromDiscovery(d discovery.ServerVersionInterface, clk clock.PassiveClock) func(context.Context) (string, error) {
	clk = defaults.Clock(clk)
	var (
		mu      sync.Mutex
		version string
		expires time.Time
	)
	return func(context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if version != "" && clk.Now().Before(expires) {
			return version, nil
		}
		info, err := d.ServerVersion()
		if err != nil {
			return "", fmt.Errorf("get the apiserver's version: %w", err)
		}
		major := strings.TrimRight(info.Major, "+")
		minor := strings.TrimRight(info.Minor, "+")
		if _, err := strconv.Atoi(major); err != nil {
			return "", fmt.Errorf("apiserver version %q: unexpected major version %q", info.GitVersion, info.Major)
		}
		if _, err := strconv.Atoi(minor); err != nil {
			return "", fmt.Errorf("apiserver version %q: unexpected minor version %q", info.GitVersion, info.Minor)
		}
		version, expires = major+"."+minor, clk.Now().Add(versionTTL)
		return version, nil
	}
}
