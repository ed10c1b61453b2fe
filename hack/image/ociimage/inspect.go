package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// ReadLayout opens the OCI layout WriteLayout wrote in dir and returns its one image index, with
// the annotations index.json gives it (its names).
func ReadLayout(dir string) (v1.ImageIndex, map[string]string, error) {
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("open the OCI layout %s: %w", dir, err)
	}
	im, err := top.IndexManifest()
	if err != nil {
		return nil, nil, fmt.Errorf("read %s/index.json: %w", dir, err)
	}
	if len(im.Manifests) != 1 || !im.Manifests[0].MediaType.IsIndex() {
		return nil, nil, fmt.Errorf("%s/index.json lists %d entries; want one image index", dir, len(im.Manifests))
	}
	desc := im.Manifests[0]
	idx, err := top.ImageIndex(desc.Digest)
	if err != nil {
		return nil, nil, fmt.Errorf("read the image index %s: %w", desc.Digest, err)
	}
	return idx, desc.Annotations, nil
}

// Images returns the images of idx with the platforms its descriptors name, in index order.
func Images(idx v1.ImageIndex) ([]PlatformImage, error) {
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read the image index: %w", err)
	}
	var out []PlatformImage
	for _, d := range im.Manifests {
		if d.Platform == nil {
			return nil, fmt.Errorf("manifest %s has no platform", d.Digest)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, fmt.Errorf("read the %s/%s image: %w", d.Platform.OS, d.Platform.Architecture, err)
		}
		out = append(out, PlatformImage{Platform: Platform{OS: d.Platform.OS, Architecture: d.Platform.Architecture}, Image: img})
	}
	return out, nil
}

// LayerFile is one entry of a layer's tar.
type LayerFile struct {
	Name     string
	Mode     int64
	Uid, Gid int
	Typeflag byte
}

// ExtractBinary lists the entries of img's layers and writes the content of BinaryPath to out
// (mode 0755).
func ExtractBinary(img v1.Image, out string) ([]LayerFile, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, fmt.Errorf("list the layers: %w", err)
	}
	var files []LayerFile
	found := false
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return nil, fmt.Errorf("open a layer: %w", err)
		}
		got, ok, err := extractFrom(tar.NewReader(rc), out)
		_ = rc.Close()
		if err != nil {
			return nil, err
		}
		files, found = append(files, got...), found || ok
	}
	if !found {
		return files, fmt.Errorf("no %s in the image's layers", BinaryPath)
	}
	return files, nil
}

func extractFrom(tr *tar.Reader, out string) ([]LayerFile, bool, error) {
	var files []LayerFile
	found := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, found, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("read a layer: %w", err)
		}
		files = append(files, LayerFile{Name: hdr.Name, Mode: hdr.Mode, Uid: hdr.Uid, Gid: hdr.Gid, Typeflag: hdr.Typeflag})
		if "/"+strings.TrimPrefix(hdr.Name, "./") != BinaryPath {
			continue
		}
		if err := writeExecutable(out, tr); err != nil {
			return nil, false, fmt.Errorf("extract %s to %s: %w", BinaryPath, out, err)
		}
		found = true
	}
}

func writeExecutable(path string, r io.Reader) (err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	_, err = io.Copy(f, r)
	return err
}
