package offline_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/admissioncheck"
	"github.com/joiner-dev/joiner/fileinput"
	"github.com/joiner-dev/joiner/policy/offline"
	"github.com/joiner-dev/joiner/testsupport/filestest"
)

// returnsWithin is the bound on a call that must not block: generous, so only a hang fails it.
const returnsWithin = 10 * time.Second

// loadWithin runs LoadObjectsWithOptions in a goroutine and fails the test if it has not returned within
// returnsWithin, so that a read that blocks fails the test instead of hanging it.
func loadWithin(t *testing.T, ctx context.Context, paths []string, stdin io.Reader, opts offline.LoadOptions) ([]offline.Object, error) {
	t.Helper()
	type result struct {
		objs []offline.Object
		err  error
	}
	done := make(chan result, 1)
	go func() {
		objs, err := offline.LoadObjectsWithOptions(ctx, paths, stdin, opts)
		done <- result{objs, err}
	}()
	select {
	case r := <-done:
		return r.objs, r.err
	case <-time.After(returnsWithin):
		t.Fatalf("LoadObjectsWithOptions(%v) still blocked after %s", paths, returnsWithin)
		return nil, nil
	}
}

// TestLoadObjectsThroughTheInputLayer: LoadObjectsWithOptions reads with the input layer (package
// fileinput, which has the detailed tests): a FIFO named with -f is refused at once, the size limit
// applies, and a cancelled context stops standard input that never ends.
func TestLoadObjectsThroughTheInputLayer(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
	tests := []struct {
		name string
		// input returns the path to load and the stdin to pass; it may cancel the context.
		input func(t *testing.T, cancel context.CancelFunc) (string, io.Reader)
		limit int64
		want  func(error) bool
	}{
		{
			name: "FIFO named with -f, nobody writing", want: is[*fileinput.NotRegularError],
			input: func(t *testing.T, _ context.CancelFunc) (string, io.Reader) {
				p := filepath.Join(t.TempDir(), "pipe.yaml")
				filestest.FIFO(t, p)
				return p, nil
			},
		},
		{
			name: "file over the limit", limit: 10, want: is[*fileinput.FileTooLargeError],
			input: func(t *testing.T, _ context.CancelFunc) (string, io.Reader) {
				return filepath.Join(filestest.Tree(t, map[string]string{"a.yaml": pod}), "a.yaml"), nil
			},
		},
		{
			name: "standard input that never ends", want: func(err error) bool { return errors.Is(err, context.Canceled) },
			input: func(t *testing.T, cancel context.CancelFunc) (string, io.Reader) {
				r, w := io.Pipe()
				t.Cleanup(func() { _ = w.Close() })
				go func() {
					// io.Pipe's Write returns once the load has read the bytes: it is reading.
					if _, err := io.WriteString(w, "apiVersion: v1\n"); err == nil {
						cancel()
					}
				}()
				return "-", r
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			path, stdin := tc.input(t, cancel)
			_, err := loadWithin(t, ctx, []string{path}, stdin, offline.LoadOptions{MaxFileSize: tc.limit})
			if !tc.want(err) || !strings.HasPrefix(fmt.Sprint(err), "load objects: read ") {
				t.Fatalf("error = %v (%T), not the one expected", err, err)
			}
		})
	}
}

func is[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

func TestPolicyCheckNoObjects(t *testing.T) {
	comments := filestest.Tree(t, map[string]string{"only-comments.yaml": "# nothing here\n---\n# nor here\n", "empty.json": "  \n"})
	empty := t.TempDir()
	broken := t.TempDir()
	filestest.Symlink(t, "gone.yaml", filepath.Join(broken, "a.yaml"))
	filestest.Symlink(t, "gone.json", filepath.Join(broken, "b.json"))
	tests := []struct {
		name     string
		paths    []string
		stdin    string
		want     []string // parts of the error
		warnings []string
	}{
		{"empty folder", []string{empty}, "", []string{"folder " + empty + " (no regular *.yaml, *.yml or *.json file in it)"}, nil},
		{"comment-only file", []string{filepath.Join(comments, "only-comments.yaml")}, "", []string{comments + "/only-comments.yaml (holds none)"}, nil},
		{"folder of files without objects", []string{comments}, "", []string{"folder " + comments + " (2 files read, none holding any)"}, nil},
		{"folder of broken symbolic links", []string{broken}, "", []string{"folder " + broken + " (no regular *.yaml, *.yml or *.json file in it; 2 entries skipped, see the warnings)"},
			[]string{"skipped " + broken + "/a.yaml: broken symbolic link to gone.yaml", "skipped " + broken + "/b.json: broken symbolic link to gone.json"}},
		{"empty standard input and an empty folder", []string{"-", empty}, "", []string{"standard input (holds none), folder " + empty}, nil},
	}
	for _, tc := range tests {
		for _, allowEmpty := range []bool{false, true} {
			name := tc.name
			if allowEmpty {
				name += " with AllowEmpty"
			}
			t.Run(name, func(t *testing.T) {
				var warnings bytes.Buffer
				code, out, err := runPolicyCheck(t, admissioncheck.Config{
					PolicyPath: policiesDir, ObjectPaths: tc.paths, Stdin: strings.NewReader(tc.stdin),
					Load: offline.LoadOptions{AllowEmpty: allowEmpty, Warnings: &warnings},
				})
				for _, w := range tc.warnings {
					if !strings.Contains(warnings.String(), w) {
						t.Errorf("warnings lack %q:\n%s", w, warnings.String())
					}
				}
				if allowEmpty {
					if code != admissioncheck.ExitAllowed || err != nil || !strings.Contains(out, "checked 0 objects against 3 policies") {
						t.Fatalf("Run = %d, %v, output %q; want 0 and an empty report", code, err, out)
					}
					return
				}
				if code != admissioncheck.ExitUsage || !is[*fileinput.EmptyError](err) {
					t.Fatalf("Run = %d, %v, output %q; want exit %d and an error", code, err, out, admissioncheck.ExitUsage)
				}
				for _, w := range append(tc.want, "no Kubernetes objects found in ", "pass --allow-empty if finding none is expected") {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if out != "" {
					t.Errorf("wrote a report despite the error: %s", out)
				}
			})
		}
	}
}

func TestLoadObjectsBrokenLinkNamedWithF(t *testing.T) {
	link := filepath.Join(t.TempDir(), "objects.yaml")
	filestest.Symlink(t, "/nonexistent/objects.yaml", link)
	_, err := offline.LoadObjectsWithOptions(context.Background(), []string{link}, nil, offline.LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "read "+link+": it is a broken symbolic link to /nonexistent/objects.yaml") {
		t.Fatalf("error = %v, want one naming the broken link and its target", err)
	}
}
