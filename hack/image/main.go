// Command image builds Joiner's multi-architecture container image (`make image`) without Docker
// or a registry, with hack/image/ociimage: the static joiner binary for each platform on an empty
// base, written as an OCI image layout and an OCI archive. With --release it first checks that the
// build is one the chart and kustomize deploy (`make release` then pushes it with crane).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/joiner-dev/joiner/hack/image/ociimage"
)

const usage = `Usage: go run ./hack/image [flags]

Builds ghcr.io/joiner-dev/joiner:<version> for linux/amd64 and linux/arm64 (CGO_ENABLED=0,
-trimpath, the version and commit stamped into the binary), one layer with /joiner on an empty
base, user 65532:65532, entrypoint /joiner with the command controller, and OCI labels. It writes
  OUT/oci                    the OCI image layout: crane push OUT/oci <ref>
  OUT/joiner-<version>.oci.tar  the same as one tar: ctr import, skopeo copy oci-archive:, docker load
  OUT/reference              the reference the image is tagged with
and prints the digests and the compressed layer size per platform. It contacts no registry.
Run it from the repository root.

Flags:
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o ociimage.Options
	fs.StringVar(&o.Out, "out", ".cache/image", "output folder")
	fs.StringVar(&o.Repository, "repository", ociimage.DefaultRepository, "image repository, without tag")
	fs.StringVar(&o.Version, "version", "", "version: the image tag and what joiner version prints (default: git describe --tags --always --dirty without a leading v, else "+ociimage.FallbackVersion+")")
	fs.StringVar(&o.Commit, "commit", "", "commit stamped into the binary and the revision label (default: git rev-parse HEAD)")
	created := fs.String("created", "", "creation time, RFC 3339 (default: HEAD's committer date, so a rebuild of a commit gives the same image)")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/architecture list")
	fs.StringVar(&o.Licenses, "licenses", ociimage.DefaultLicenses, "SPDX expression of the org.opencontainers.image.licenses label")
	fs.StringVar(&o.Source, "source", ociimage.DefaultSource, "org.opencontainers.image.source label")
	fs.StringVar(&o.Package, "package", ociimage.DefaultPackage, "main package to build")
	release := fs.Bool("release", false, "refuse a build the chart and kustomize do not deploy (a dirty tree, or a version other than the chart's appVersion)")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "image: unexpected arguments %v\n", fs.Args())
		return 2
	}
	var err error
	if o.Platforms, err = ociimage.ParsePlatforms(*platforms); err != nil {
		fmt.Fprintln(stderr, "image:", err)
		return 2
	}
	if *created != "" {
		if o.Created, err = time.Parse(time.RFC3339, *created); err != nil {
			fmt.Fprintf(stderr, "image: --created %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z\n", *created)
			return 2
		}
	}
	o.Metadata = ociimage.FromGit(ctx, ".", o.Metadata)
	if err := o.Metadata.Validate(); err != nil {
		fmt.Fprintln(stderr, "image:", err)
		return 1
	}
	if *release {
		if err := ociimage.CheckRelease(o.Metadata, "."); err != nil {
			fmt.Fprintln(stderr, "image: not a release:", err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "image: building the binary and layer for %s\n", strings.ReplaceAll(*platforms, ",", ", "))
	res, err := ociimage.Build(ctx, o)
	if err != nil {
		fmt.Fprintln(stderr, "image:", err)
		return 1
	}
	if err := res.Summary(stdout); err != nil {
		fmt.Fprintln(stderr, "image:", err)
		return 1
	}
	return 0
}
