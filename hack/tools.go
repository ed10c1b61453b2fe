//go:build tools

// Package hack pins the build tools and libraries the project depends on, so that
// `go mod tidy` keeps them and every developer builds with the same versions.
package hack

import (
	_ "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	_ "github.com/open-policy-agent/opa/v1/rego"
	_ "github.com/robfig/cron/v3"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
