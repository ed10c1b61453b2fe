package ociimage

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// WriteLayer writes the image's one layer to out, a gzip-compressed tar holding the file binary
// as BinaryPath: mode 0755, owned by root, modified at m.Created. The gzip header carries no name
// and no time, so the same binary and metadata give the same bytes. It returns the layer, read
// back from out.
func WriteLayer(binary string, m Metadata, out string) (v1.Layer, error) {
	m = m.withDefaults()
	if err := writeLayerFile(binary, m, out); err != nil {
		return nil, fmt.Errorf("write the layer %s: %w", out, err)
	}
	layer, err := tarball.LayerFromFile(out, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("read the layer %s: %w", out, err)
	}
	return layer, nil
}

func writeLayerFile(binary string, m Metadata, out string) (err error) {
	in, size, err := openRegular(binary)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     strings.TrimPrefix(BinaryPath, "/"),
		Mode:     0o755,
		Size:     size,
		ModTime:  m.Created,
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.Copy(tw, in); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// Image returns the single-platform image of layer: an OCI manifest on an empty base, run as
// User with Entrypoint and Cmd, labelled with m.Labels().
func Image(layer v1.Layer, p Platform, m Metadata) (v1.Image, error) {
	m = m.withDefaults()
	cfg := &v1.ConfigFile{
		Architecture: p.Architecture,
		OS:           p.OS,
		Created:      v1.Time{Time: m.Created},
		Config: v1.Config{
			User:       User,
			Entrypoint: Entrypoint,
			Cmd:        Cmd,
			WorkingDir: "/",
			Labels:     m.Labels(),
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	base, err := mutate.ConfigFile(base, cfg)
	if err != nil {
		return nil, fmt.Errorf("image config for %s: %w", p, err)
	}
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: m.Created}, CreatedBy: "hack/image: " + BinaryPath + " built from " + DefaultPackage},
	})
	if err != nil {
		return nil, fmt.Errorf("add the layer for %s: %w", p, err)
	}
	return img, nil
}

// PlatformImage is one platform's image, for Index.
type PlatformImage struct {
	Platform Platform
	Image    v1.Image
}

// Index returns the OCI image index over images, in their order, each with its platform, and with
// m.Labels() as the index's annotations (registries such as ghcr.io show them).
func Index(images []PlatformImage, m Metadata) (v1.ImageIndex, error) {
	if len(images) == 0 {
		return nil, errors.New("an index needs at least one platform's image")
	}
	adds := make([]mutate.IndexAddendum, 0, len(images))
	for _, pi := range images {
		adds = append(adds, mutate.IndexAddendum{
			Add: imageWithoutArtifactType{pi.Image},
			Descriptor: v1.Descriptor{
				MediaType: types.OCIManifestSchema1,
				Platform:  &v1.Platform{OS: pi.Platform.OS, Architecture: pi.Platform.Architecture},
			},
		})
	}
	idx := mutate.AppendManifests(empty.Index, adds...)
	annotated, ok := mutate.Annotations(idx, m.withDefaults().Labels()).(v1.ImageIndex)
	if !ok {
		return nil, errors.New("annotating the index did not return an index")
	}
	return annotated, nil
}

// imageWithoutArtifactType keeps the artifactType out of the index's descriptors (go-containerregistry
// sets the config's media type there): the image-spec reserves it for artifacts, and indexes that
// Docker and other builders write have none, so no client reads this image as an artifact.
type imageWithoutArtifactType struct{ v1.Image }

// ArtifactType is empty: an image is no artifact.
func (imageWithoutArtifactType) ArtifactType() (string, error) { return "", nil }
