package ociimage

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// What Build writes under Options.Out.
const (
	// LayoutDir is the OCI image layout (`crane push OUT/oci REF`).
	LayoutDir = "oci"
	// ReferenceFile holds the reference the image is tagged with, for `make release`.
	ReferenceFile = "reference"
	// BuildDir holds the binaries and layers, one of each per platform.
	BuildDir = "build"
)

// ArchiveName is the file name of the OCI archive of a version.
func ArchiveName(version string) string { return "joiner-" + version + ".oci.tar" }

// Options are one image build.
type Options struct {
	Metadata
	BinaryOptions
	// Platforms to build (DefaultPlatforms).
	Platforms []Platform
	// Out is the output folder (required): see LayoutDir, ArchiveName, ReferenceFile and BuildDir.
	// It holds one build: Build replaces the layout and removes other versions' archives.
	Out string
}

// PlatformResult is what Build made for one platform.
type PlatformResult struct {
	Platform Platform
	// Manifest is the digest of the platform's image manifest.
	Manifest v1.Hash
	// Binary is the path of the built binary.
	Binary string
	// BinaryBytes is the binary's size; LayerBytes the compressed layer's, what a node pulls.
	BinaryBytes, LayerBytes int64
}

// Result is what Build made.
type Result struct {
	// Metadata is the build's, defaults filled in.
	Metadata Metadata
	// Index is the digest of the image index (what a registry stores under the tag).
	Index v1.Hash
	// Layout and Archive are the paths of the OCI layout and of its tar.
	Layout, Archive string
	Platforms       []PlatformResult
}

// Build builds the binary for each platform, assembles the images and their index, and writes the
// layout, the archive and the reference file under o.Out.
func Build(ctx context.Context, o Options) (Result, error) {
	m := o.Metadata.withDefaults()
	if err := m.Validate(); err != nil {
		return Result{}, err
	}
	if o.Out == "" {
		return Result{}, fmt.Errorf("--out is required: the folder the image is written to")
	}
	platforms := o.Platforms
	if len(platforms) == 0 {
		platforms = DefaultPlatforms
	}
	work := filepath.Join(o.Out, BuildDir)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return Result{}, fmt.Errorf("create %s: %w", work, err)
	}
	res := Result{Metadata: m, Layout: filepath.Join(o.Out, LayoutDir), Archive: filepath.Join(o.Out, ArchiveName(m.Version))}
	var images []PlatformImage
	for _, p := range platforms {
		img, pr, err := buildPlatform(ctx, o.BinaryOptions, p, m, work)
		if err != nil {
			return Result{}, err
		}
		images = append(images, PlatformImage{Platform: p, Image: img})
		res.Platforms = append(res.Platforms, pr)
	}
	idx, err := Index(images, m)
	if err != nil {
		return Result{}, err
	}
	if res.Index, err = idx.Digest(); err != nil {
		return Result{}, fmt.Errorf("digest of the image index: %w", err)
	}
	if err := WriteLayout(res.Layout, idx, m); err != nil {
		return Result{}, err
	}
	if err := removeStaleArchives(o.Out, res.Archive); err != nil {
		return Result{}, err
	}
	if err := WriteArchive(res.Layout, res.Archive, m.Created); err != nil {
		return Result{}, err
	}
	ref := filepath.Join(o.Out, ReferenceFile)
	if err := os.WriteFile(ref, []byte(m.Reference()+"\n"), 0o644); err != nil {
		return Result{}, fmt.Errorf("write %s: %w", ref, err)
	}
	return res, nil
}

// removeStaleArchives deletes the archives of other versions from out (each is as large as the
// image): out holds one build, as its layout does.
func removeStaleArchives(out, keep string) error {
	stale, err := filepath.Glob(filepath.Join(out, ArchiveName("*")))
	if err != nil {
		return fmt.Errorf("list the archives in %s: %w", out, err)
	}
	for _, f := range stale {
		if f == keep {
			continue
		}
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("remove the archive of an earlier build: %w", err)
		}
	}
	return nil
}

// buildPlatform builds p's binary and layer into work and returns p's image.
func buildPlatform(ctx context.Context, bo BinaryOptions, p Platform, m Metadata, work string) (v1.Image, PlatformResult, error) {
	pr := PlatformResult{Platform: p, Binary: filepath.Join(work, "joiner-"+p.OS+"-"+p.Architecture)}
	if err := BuildBinary(ctx, bo, p, m, pr.Binary); err != nil {
		return nil, pr, err
	}
	layer, err := WriteLayer(pr.Binary, m, pr.Binary+".tar.gz")
	if err != nil {
		return nil, pr, err
	}
	img, err := Image(layer, p, m)
	if err != nil {
		return nil, pr, err
	}
	if pr.Manifest, err = img.Digest(); err != nil {
		return nil, pr, fmt.Errorf("digest of the %s image: %w", p, err)
	}
	if pr.LayerBytes, err = layer.Size(); err != nil {
		return nil, pr, fmt.Errorf("size of the %s layer: %w", p, err)
	}
	fi, err := os.Stat(pr.Binary)
	if err != nil {
		return nil, pr, err
	}
	pr.BinaryBytes = fi.Size()
	return img, pr, nil
}

// Summary prints the reference, the digests and the sizes of r.
func (r Result) Summary(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "image\t%s@%s\n", r.Metadata.Reference(), r.Index)
	fmt.Fprintf(tw, "layout\t%s\n", r.Layout)
	fmt.Fprintf(tw, "archive\t%s\n", r.Archive)
	for _, p := range r.Platforms {
		fmt.Fprintf(tw, "%s\tlayer %s compressed (binary %s)\t%s\n", p.Platform, mib(p.LayerBytes), mib(p.BinaryBytes), p.Manifest)
	}
	return tw.Flush()
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
