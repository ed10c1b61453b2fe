package main

import (
	"fmt"
	"runtime"

	// Mozilla's root certificates, compiled in: the image has no /etc/ssl, and the AWS SDK, the EKS
	// API and any HTTPS endpoint still verify. The system's roots win where a system has them.
	_ "golang.org/x/crypto/x509roots/fallback"
)

// commit is the git commit the binary is built from, set at build time with
// -ldflags "-X main.commit=..." (hack/image does, with the version).
var commit = "unknown"

// versionLine is what `joiner version` prints: the version first, then the commit, the Go
// version and the platform.
func versionLine() string {
	return fmt.Sprintf("joiner %s (commit %s, %s, %s/%s)", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
