package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// WriteLayout writes idx as an OCI image layout in dir, replacing what dir held. The layout's
// index.json has one entry, idx, named by m.Version (org.opencontainers.image.ref.name) and
// m.Reference() (io.containerd.image.name): `crane push DIR REF` pushes idx itself, and
// `ctr import` of WriteArchive's tar names the image m.Reference().
func WriteLayout(dir string, idx v1.ImageIndex, m Metadata) error {
	m = m.withDefaults()
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("clear the layout folder %s: %w", dir, err)
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("create the OCI layout %s: %w", dir, err)
	}
	err = p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		RefNameAnnotation:        m.Version,
		ContainerdNameAnnotation: m.Reference(),
	}))
	if err != nil {
		return fmt.Errorf("write the image index into %s: %w", dir, err)
	}
	return nil
}

// WriteArchive writes the layout in dir as one uncompressed tar at out (the blobs are compressed
// already): an OCI archive, which `ctr import`, `skopeo copy oci-archive:` and `docker load`
// (Docker 25 and later) read. Entries are in lexical order, owned by root, and dated mtime, so
// one layout gives one archive.
func WriteArchive(dir, out string, mtime time.Time) (err error) {
	f, err := os.Create(out)
	if err != nil {
		return fmt.Errorf("create the archive %s: %w", out, err)
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	tw := tar.NewWriter(f)
	// WalkDir visits entries in lexical order.
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil || rel == "." {
			return err
		}
		return addToArchive(tw, path, filepath.ToSlash(rel), d, mtime)
	})
	if err != nil {
		return fmt.Errorf("archive the layout %s into %s: %w", dir, out, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("finish the archive %s: %w", out, err)
	}
	return nil
}

func addToArchive(tw *tar.Writer, path, name string, d fs.DirEntry, mtime time.Time) error {
	hdr := &tar.Header{Name: name, ModTime: mtime.UTC(), Format: tar.FormatPAX}
	if d.IsDir() {
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, name+"/", 0o755
		return tw.WriteHeader(hdr)
	}
	in, size, err := openRegular(path)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, size
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(tw, in)
	return err
}

// openRegular opens the regular file at path and returns it with its size.
func openRegular(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s is not a regular file", path)
	}
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}
