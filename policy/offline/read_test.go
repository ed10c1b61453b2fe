package offline_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/policy/offline"
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

// mkfifo creates a named pipe at path. When the test ends, it opens the pipe for writing without blocking
// and closes it, which releases a reader still waiting in open.
func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	t.Cleanup(func() {
		if w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			_ = w.Close()
		}
	})
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

func TestLoadObjectsReadsOnlyRegularFilesFromFolders(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"good.yaml":     "apiVersion: v1\nkind: Pod\nmetadata: {name: good}\n",
		"sub/deep.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: deep}\n",
	})
	mkfifo(t, filepath.Join(dir, "pipe.yaml"))
	mkfifo(t, filepath.Join(dir, "sub", "pipe.json"))
	symlink(t, "pipe.yaml", filepath.Join(dir, "link-to-pipe.yml"))
	symlink(t, "missing.yaml", filepath.Join(dir, "broken.yaml"))
	symlink(t, "sub", filepath.Join(dir, "folder-link.yaml"))
	symlink(t, "good.yaml", filepath.Join(dir, "link-to-good.yaml"))

	var warnings bytes.Buffer
	objs, err := loadWithin(t, context.Background(), []string{dir}, nil, offline.LoadOptions{Warnings: &warnings})
	if err != nil {
		t.Fatalf("LoadObjectsWithOptions: %v", err)
	}
	var sources []string
	for _, o := range objs {
		sources = append(sources, strings.TrimPrefix(o.Source, dir+"/"))
	}
	if want := []string{"good.yaml#1", "link-to-good.yaml#1", "sub/deep.yaml#1"}; strings.Join(sources, " ") != strings.Join(want, " ") {
		t.Errorf("sources = %v, want %v", sources, want)
	}
	for _, want := range []string{
		"warning: skipped " + filepath.Join(dir, "pipe.yaml") + ": a named pipe (FIFO), which may never end; only regular files are read from a folder",
		"warning: skipped " + filepath.Join(dir, "sub", "pipe.json") + ": a named pipe (FIFO)",
		"warning: skipped " + filepath.Join(dir, "link-to-pipe.yml") + ": a named pipe (FIFO)",
		"warning: skipped " + filepath.Join(dir, "broken.yaml") + ": broken symbolic link to missing.yaml",
		"warning: skipped " + filepath.Join(dir, "folder-link.yaml") + ": symbolic link to the folder sub",
	} {
		if !strings.Contains(warnings.String(), want) {
			t.Errorf("warnings lack %q:\n%s", want, warnings.String())
		}
	}
	if n := strings.Count(warnings.String(), "\n"); n != 5 {
		t.Errorf("%d warnings, want 5:\n%s", n, warnings.String())
	}
}

func TestLoadObjectsStopsWhenCancelled(t *testing.T) {
	fifo := func(t *testing.T) string {
		p := filepath.Join(t.TempDir(), "pipe")
		mkfifo(t, p)
		return p
	}
	tests := []struct {
		name string
		// input returns the path to load, the stdin to pass, and a function that, once the load has
		// started, waits until it is blocked in a read (nil: the load may still be blocked in open).
		input func(t *testing.T) (path string, stdin io.Reader, blockedInRead func(t *testing.T))
		// cancelFirst cancels the context before the call.
		cancelFirst bool
	}{
		{
			name: "FIFO named with -f with no writer",
			input: func(t *testing.T) (string, io.Reader, func(*testing.T)) {
				return fifo(t), nil, nil
			},
		},
		{
			name:        "FIFO named with -f, context cancelled before the call",
			cancelFirst: true,
			input: func(t *testing.T) (string, io.Reader, func(*testing.T)) {
				return fifo(t), nil, nil
			},
		},
		{
			name: "FIFO named with -f whose writer never finishes",
			input: func(t *testing.T) (string, io.Reader, func(*testing.T)) {
				p := fifo(t)
				return p, nil, func(t *testing.T) {
					w, err := os.OpenFile(p, os.O_WRONLY, 0) // returns once the load has opened the FIFO
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = w.Close() })
					if _, err := io.WriteString(w, "apiVersion: v1\n"); err != nil {
						t.Fatal(err)
					}
				}
			},
		},
		{
			name: "standard input that never ends",
			input: func(t *testing.T) (string, io.Reader, func(*testing.T)) {
				r, w := io.Pipe()
				t.Cleanup(func() { _ = w.Close() })
				return "-", r, func(t *testing.T) {
					// io.Pipe's Write returns once the load has read the bytes.
					if _, err := io.WriteString(w, "apiVersion: v1\n"); err != nil {
						t.Fatal(err)
					}
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			path, stdin, blockedInRead := tc.input(t)
			if tc.cancelFirst {
				cancel()
			}
			done := make(chan error, 1)
			go func() {
				_, err := offline.LoadObjectsWithOptions(ctx, []string{path}, stdin, offline.LoadOptions{})
				done <- err
			}()
			if blockedInRead != nil {
				blockedInRead(t)
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "stopped") {
					t.Fatalf("error = %v, want one saying the read stopped because the context was cancelled", err)
				}
			case <-time.After(returnsWithin):
				t.Fatalf("LoadObjectsWithOptions still blocked %s after the context was cancelled", returnsWithin)
			}
		})
	}
}

func TestLoadObjectsSizeLimit(t *testing.T) {
	pod := "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
	tests := []struct {
		name  string
		limit int64
		// input returns the path to load and the stdin to pass.
		input func(t *testing.T) (string, io.Reader)
		want  []string // error substrings; none means the load must succeed with one object
	}{
		{
			name: "file under the default limit", input: func(t *testing.T) (string, io.Reader) {
				return filepath.Join(writeFiles(t, map[string]string{"a.yaml": pod}), "a.yaml"), nil
			},
		},
		{
			name: "file over the limit", limit: 1 << 10, input: func(t *testing.T) (string, io.Reader) {
				return filepath.Join(writeFiles(t, map[string]string{"big.yaml": pod + "data: " + strings.Repeat("x", 2000) + "\n"}), "big.yaml"), nil
			},
			want: []string{"big.yaml: it holds 2052 bytes (2052B), over the limit of 1KiB on one input file", "raise the limit with --max-file-size (for example --max-file-size=4KiB)"},
		},
		{
			// Before the limit, this single-line document failed with "bufio.Scanner: token too long".
			name: "70 MB single-line document over the default limit", input: func(t *testing.T) (string, io.Reader) {
				p := filepath.Join(t.TempDir(), "huge.json")
				if err := os.WriteFile(p, []byte(`{"kind": "`), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(p, 70_000_000); err != nil { // sparse: nothing is written or read
					t.Fatal(err)
				}
				return p, nil
			},
			want: []string{"huge.json: it holds 70000000 bytes (66.8MiB), over the limit of 64MiB on one input file", "--max-file-size=128MiB"},
		},
		{
			name: "device named with -f", limit: 1 << 20, input: func(t *testing.T) (string, io.Reader) {
				if _, err := os.Stat("/dev/zero"); err != nil {
					t.Skip("no /dev/zero")
				}
				return "/dev/zero", nil
			},
			want: []string{"read /dev/zero: it holds more than 1MiB, over the limit of 1MiB on one input file", "--max-file-size=2MiB"},
		},
		{
			name: "standard input over the limit", limit: 100, input: func(t *testing.T) (string, io.Reader) {
				return "-", strings.NewReader(pod + "data: " + strings.Repeat("x", 100) + "\n")
			},
			want: []string{"read standard input: it holds more than 100B, over the limit of 100B", "--max-file-size"},
		},
		{
			name: "FIFO named with -f under the limit", input: func(t *testing.T) (string, io.Reader) {
				p := filepath.Join(t.TempDir(), "pipe")
				mkfifo(t, p)
				go func() {
					w, err := os.OpenFile(p, os.O_WRONLY, 0)
					if err != nil {
						return // the load fails and reports it
					}
					defer func() { _ = w.Close() }()
					_, _ = io.WriteString(w, pod)
				}()
				return p, nil
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, stdin := tc.input(t)
			objs, err := loadWithin(t, context.Background(), []string{path}, stdin, offline.LoadOptions{MaxFileSize: tc.limit})
			if len(tc.want) == 0 {
				if err != nil || len(objs) != 1 {
					t.Fatalf("LoadObjectsWithOptions = %d objects, %v; want 1 object", len(objs), err)
				}
				return
			}
			var tooLarge *offline.FileTooLargeError
			if !errors.As(err, &tooLarge) {
				t.Fatalf("error = %v, want a *FileTooLargeError", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestRunCheckNoObjects(t *testing.T) {
	comments := writeFiles(t, map[string]string{"only-comments.yaml": "# nothing here\n---\n# nor here\n", "empty.json": "  \n"})
	empty := t.TempDir()
	broken := t.TempDir()
	symlink(t, "gone.yaml", filepath.Join(broken, "a.yaml"))
	symlink(t, "gone.json", filepath.Join(broken, "b.json"))
	tests := []struct {
		name     string
		paths    []string
		stdin    string
		want     []string // parts of the error
		warnings []string
	}{
		{"empty folder", []string{empty}, "", []string{"folder " + empty + " (no regular *.yaml, *.yml or *.json file in it)"}, nil},
		{"comment-only file", []string{filepath.Join(comments, "only-comments.yaml")}, "", []string{comments + "/only-comments.yaml (holds no object)"}, nil},
		{"folder of files without objects", []string{comments}, "", []string{"folder " + comments + " (2 files read, none holding an object)"}, nil},
		{"folder of broken symbolic links", []string{broken}, "", []string{"folder " + broken + " (no regular *.yaml, *.yml or *.json file in it; 2 entries skipped, see the warnings)"},
			[]string{"skipped " + broken + "/a.yaml: broken symbolic link to gone.yaml", "skipped " + broken + "/b.json: broken symbolic link to gone.json"}},
		{"empty standard input and an empty folder", []string{"-", empty}, "", []string{"standard input (holds no object), folder " + empty}, nil},
	}
	for _, tc := range tests {
		for _, allowEmpty := range []bool{false, true} {
			name := tc.name
			if allowEmpty {
				name += " with AllowEmpty"
			}
			t.Run(name, func(t *testing.T) {
				var out, warnings bytes.Buffer
				code, err := offline.RunCheck(context.Background(), offline.CheckConfig{
					PolicyDir: policiesDir, ObjectPaths: tc.paths, Stdin: strings.NewReader(tc.stdin),
					Load: offline.LoadOptions{AllowEmpty: allowEmpty, Warnings: &warnings},
				}, &out)
				for _, w := range tc.warnings {
					if !strings.Contains(warnings.String(), w) {
						t.Errorf("warnings lack %q:\n%s", w, warnings.String())
					}
				}
				if allowEmpty {
					if code != 0 || err != nil || !strings.Contains(out.String(), "checked 0 objects against 3 policies") {
						t.Fatalf("RunCheck = %d, %v, output %q; want 0 and an empty report", code, err, out.String())
					}
					return
				}
				if code != 1 || err == nil {
					t.Fatalf("RunCheck = %d, %v, output %q; want exit 1 and an error", code, err, out.String())
				}
				for _, w := range append(tc.want, "no Kubernetes objects found in ", "pass --allow-empty if finding no objects is expected") {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				if out.Len() != 0 {
					t.Errorf("wrote a report despite the error: %s", out.String())
				}
			})
		}
	}
}

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		err  string
	}{
		{"10Mi", 10 << 20, ""},
		{"64MiB", 64 << 20, ""},
		{"512k", 512 << 10, ""},
		{"1G", 1 << 30, ""},
		{"2gb", 2 << 30, ""},
		{"1048576", 1 << 20, ""},
		{"100B", 100, ""},
		{" 3 Ki ", 3 << 10, ""},
		{"0", 0, "must be larger than zero"},
		{"-1", 0, "want a whole number"},
		{"", 0, "want a whole number"},
		{"1.5Mi", 0, "unknown unit"},
		{"10Mx", 0, `unknown unit "Mx"`},
		{"9999999999999G", 0, "too large"},
		{"99999999999999999999", 0, "out of range"},
	}
	for _, tc := range tests {
		got, err := offline.ParseSize(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseSize(%q) = %d, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, n := range []int64{1, 1000, 1 << 10, 3 << 20, 64 << 20, 5 << 30} {
		if back, err := offline.ParseSize(offline.FormatSize(n)); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, offline.FormatSize(n), back, err)
		}
	}
}

func TestLoadObjectsBrokenLinkNamedWithF(t *testing.T) {
	link := filepath.Join(t.TempDir(), "objects.yaml")
	symlink(t, "/nonexistent/objects.yaml", link)
	_, err := offline.LoadObjectsWithOptions(context.Background(), []string{link}, nil, offline.LoadOptions{})
	if err == nil || !strings.Contains(err.Error(), "read "+link+": broken symbolic link to /nonexistent/objects.yaml") {
		t.Fatalf("error = %v, want one naming the broken link and its target", err)
	}
}
