package localrun

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplyManifests server-side applies every object in the YAML files of dir (or the one file),
// in file-name order, as field manager joiner-local.
func ApplyManifests(ctx context.Context, cfg *rest.Config, path string) error {
	files := []string{path}
	if fi, err := os.Stat(path); err != nil {
		return fmt.Errorf("manifests %s: %w", path, err)
	} else if fi.IsDir() {
		files, err = filepath.Glob(filepath.Join(path, "*.yaml"))
		if err != nil {
			return err
		}
		sort.Strings(files)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return fmt.Errorf("decode %s: %w", f, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("joiner-local"), client.ForceOwnership); err != nil {
				return fmt.Errorf("apply %s %s from %s: %w", u.GetKind(), u.GetName(), f, err)
			}
		}
	}
	return nil
}
