package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"
)

// assemble runs the steps of Build after the go build, on stand-in binaries (platformBinary), into
// dir, and returns the archive's path.
func assemble(t *testing.T, dir string, binary []byte, m Metadata) string {
	t.Helper()
	var images []PlatformImage
	for _, p := range DefaultPlatforms {
		bin := filepath.Join(dir, "joiner-"+p.Architecture)
		if err := os.WriteFile(bin, platformBinary(binary, p), 0o600); err != nil {
			t.Fatal(err)
		}
		layer, err := WriteLayer(bin, m, bin+".tar.gz")
		if err != nil {
			t.Fatal(err)
		}
		img, err := Image(layer, p, m)
		if err != nil {
			t.Fatal(err)
		}
		images = append(images, PlatformImage{Platform: p, Image: img})
	}
	idx, err := Index(images, m)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteLayout(filepath.Join(dir, LayoutDir), idx, m); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "image.oci.tar")
	if err := WriteArchive(filepath.Join(dir, LayoutDir), archive, m.withDefaults().Created); err != nil {
		t.Fatal(err)
	}
	return archive
}

func TestAssembledLayout(t *testing.T) {
	m := Metadata{Version: "1.2.3", Commit: strings.Repeat("ab", 20), Created: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	binary := bytes.Repeat([]byte("not really an ELF file "), 1000)
	dir := t.TempDir()
	assemble(t, dir, binary, m)

	idx, names, err := ReadLayout(filepath.Join(dir, LayoutDir))
	if err != nil {
		t.Fatal(err)
	}
	if names[RefNameAnnotation] != "1.2.3" || names[ContainerdNameAnnotation] != DefaultRepository+":1.2.3" {
		t.Errorf("index.json names the image %v, want ref.name 1.2.3 and %s:1.2.3", names, DefaultRepository)
	}
	if mt, _ := idx.MediaType(); mt != types.OCIImageIndex {
		t.Errorf("index media type %s, want %s", mt, types.OCIImageIndex)
	}
	if im, _ := idx.IndexManifest(); im.Annotations[LabelVersion] != "1.2.3" || im.Annotations[LabelRevision] != m.Commit {
		t.Errorf("index annotations %v, want the labels", im.Annotations)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range im.Manifests {
		if d.ArtifactType != "" || d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("index entry %s: media type %s, artifactType %q; want an image manifest, no artifactType", d.Digest, d.MediaType, d.ArtifactType)
		}
	}
	images, err := Images(idx)
	if err != nil {
		t.Fatal(err)
	}
	var got []Platform
	for _, pi := range images {
		got = append(got, pi.Platform)
		checkImage(t, pi, m, binary)
	}
	if !slices.Equal(got, DefaultPlatforms) {
		t.Errorf("platforms %v, want %v", got, DefaultPlatforms)
	}
}

// checkImage asserts one platform's image: OCI media types, the runtime config, the labels, and a
// layer holding only /joiner, executable, owned by root, with the binary's bytes.
func checkImage(t *testing.T, pi PlatformImage, m Metadata, binary []byte) {
	t.Helper()
	p := pi.Platform
	if mt, _ := pi.Image.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("%s: manifest media type %s, want %s", p, mt, types.OCIManifestSchema1)
	}
	cf, err := pi.Image.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != p.OS || cf.Architecture != p.Architecture || c.User != User ||
		!slices.Equal(c.Entrypoint, []string{"/joiner"}) || !slices.Equal(c.Cmd, []string{"controller"}) || !cf.Created.Equal(m.Created) {
		t.Errorf("%s: config %s/%s user %q entrypoint %q cmd %q created %s", p, cf.OS, cf.Architecture, c.User, c.Entrypoint, c.Cmd, cf.Created)
	}
	for k, v := range m.withDefaults().Labels() {
		if c.Labels[k] != v {
			t.Errorf("%s: label %s = %q, want %q", p, k, c.Labels[k], v)
		}
	}
	layers, err := pi.Image.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%s: %d layers (%v), want 1", p, len(layers), err)
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("%s: layer media type %s, want %s", p, mt, types.OCILayer)
	}
	out := filepath.Join(t.TempDir(), "joiner")
	files, err := ExtractBinary(pi.Image, out)
	if err != nil {
		t.Fatal(err)
	}
	if want := []LayerFile{{Name: "joiner", Mode: 0o755, Typeflag: tar.TypeReg}}; !slices.Equal(files, want) {
		t.Errorf("%s: layer entries %+v, want %+v", p, files, want)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, platformBinary(binary, p)) {
		t.Errorf("%s: extracted binary differs from the one built (%v)", p, err)
	}
}

// TestAssemblyIsReproducible: the same binary and metadata give the same archive, byte for byte,
// and a different version gives a different one.
func TestAssemblyIsReproducible(t *testing.T) {
	m := Metadata{Version: "1.2.3", Commit: "abcdef0", Created: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	binary := []byte("binary")
	a := readAll(t, assemble(t, t.TempDir(), binary, m))
	b := readAll(t, assemble(t, t.TempDir(), binary, m))
	if !bytes.Equal(a, b) {
		t.Error("two assemblies of the same input differ")
	}
	m.Version = "1.2.4"
	if c := readAll(t, assemble(t, t.TempDir(), binary, m)); bytes.Equal(a, c) {
		t.Error("another version gave the same archive")
	}
}

// TestArchiveHoldsTheLayout: the archive is the layout folder, in order, dated Created, so that
// `ctr import` finds oci-layout, index.json and every blob.
func TestArchiveHoldsTheLayout(t *testing.T) {
	m := Metadata{Version: "1.2.3", Commit: "abcdef0", Created: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
	dir := t.TempDir()
	archive := assemble(t, dir, []byte("binary"), m)
	var names []string
	tr := tar.NewReader(bytes.NewReader(readAll(t, archive)))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !hdr.ModTime.Equal(m.Created) || hdr.Uid != 0 {
			t.Errorf("%s: dated %s, uid %d; want %s, 0", hdr.Name, hdr.ModTime, hdr.Uid, m.Created)
		}
		if hdr.Typeflag == tar.TypeReg {
			content, _ := io.ReadAll(tr)
			if onDisk := readAll(t, filepath.Join(dir, LayoutDir, hdr.Name)); !bytes.Equal(content, onDisk) {
				t.Errorf("%s differs from the layout's file", hdr.Name)
			}
		}
		names = append(names, hdr.Name)
	}
	if !slices.IsSorted(names) || !slices.Contains(names, "oci-layout") || !slices.Contains(names, "index.json") {
		t.Errorf("archive entries %q: want oci-layout and index.json, sorted", names)
	}
	blobs, err := os.ReadDir(filepath.Join(dir, LayoutDir, "blobs", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	// Per platform a layer, a config and a manifest, then the index.
	if want := 3*len(DefaultPlatforms) + 1; len(blobs) != want {
		t.Errorf("%d blobs, want %d", len(blobs), want)
	}
	for _, b := range blobs {
		if !slices.Contains(names, "blobs/sha256/"+b.Name()) {
			t.Errorf("blob %s is not in the archive", b.Name())
		}
	}
}

// platformBinary is the stand-in binary of p: each platform's differs, as real ones do.
func platformBinary(binary []byte, p Platform) []byte {
	return append(slices.Clip(binary), p.String()...)
}

func readAll(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
