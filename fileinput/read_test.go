package fileinput_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/fileinput"
	"github.com/joiner-dev/joiner/testsupport/filestest"
)

// returnsWithin is the bound on a call that must not block: generous, so only a hang fails it.
const returnsWithin = 10 * time.Second

// readWithin runs ReadAll in a goroutine, collecting the files read, and fails the test if it has not
// returned within returnsWithin, so that a read that blocks fails the test instead of hanging it.
func readWithin(t *testing.T, ctx context.Context, paths []string, opts fileinput.Options) ([]fileinput.File, []fileinput.Listing, error) {
	t.Helper()
	type result struct {
		files    []fileinput.File
		listings []fileinput.Listing
		err      error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		r.listings, r.err = fileinput.ReadAll(ctx, paths, opts, func(f fileinput.File) error {
			r.files = append(r.files, f)
			return nil
		})
		done <- r
	}()
	select {
	case r := <-done:
		return r.files, r.listings, r.err
	case <-time.After(returnsWithin):
		t.Fatalf("ReadAll(%v) still blocked after %s", paths, returnsWithin)
		return nil, nil, nil
	}
}

func TestReadAllReadsOnlyRegularFilesFromFolders(t *testing.T) {
	dir := filestest.Tree(t, map[string]string{
		"good.yaml":      "a: 1\n",
		"UPPER.YML":      "b: 2\n",
		"sub/deep.json":  "{}\n",
		"ignored.txt":    "not read",
		".hidden/x.yaml": "hidden: true\n",
	})
	filestest.FIFO(t, filepath.Join(dir, "pipe.yaml"))
	filestest.FIFO(t, filepath.Join(dir, "sub", "pipe.json"))
	filestest.Symlink(t, "pipe.yaml", filepath.Join(dir, "link-to-pipe.yml"))
	filestest.Symlink(t, "missing.yaml", filepath.Join(dir, "broken.yaml"))
	filestest.Symlink(t, "sub", filepath.Join(dir, "folder-link.yaml"))
	filestest.Symlink(t, "good.yaml", filepath.Join(dir, "link-to-good.yaml"))

	var warnings bytes.Buffer
	files, listings, err := readWithin(t, context.Background(), []string{dir},
		fileinput.Options{Exts: []string{".yaml", ".yml", ".json"}, Warnings: &warnings})
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	var rels []string
	for _, f := range files {
		rels = append(rels, f.Rel)
		if f.Path != filepath.Join(dir, f.Rel) {
			t.Errorf("file %s has Rel %s", f.Path, f.Rel)
		}
	}
	if got, want := strings.Join(rels, " "), "UPPER.YML good.yaml link-to-good.yaml sub/deep.json"; got != want {
		t.Errorf("read %s, want %s", got, want)
	}
	if l := listings[0]; !l.Folder || l.Read != 4 || l.Skipped != 5 {
		t.Errorf("listing = %+v, want a folder with 4 files read and 5 skipped", l)
	}
	for _, want := range []string{
		"warning: skipped " + filepath.Join(dir, "pipe.yaml") + ": a named pipe (FIFO); only regular files are read from a folder",
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

// TestReadAllRefusesBadInputs: every input that is not a regular text file within the limit is refused,
// at once, with an error that names it and says what to do.
func TestReadAllRefusesBadInputs(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe.yaml")
	filestest.FIFO(t, fifo)
	sock := filepath.Join(dir, "s.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	broken := filepath.Join(dir, "broken.yaml")
	filestest.Symlink(t, "/nonexistent/objects.yaml", broken)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	binary := write("binary.yaml", []byte("\x7fELF\x02\x01\x01\x00\x00"))
	latin1 := write("latin1.yaml", []byte("name: caf\xe9\n"))
	big := write("big.yaml", []byte("a: "+strings.Repeat("x", 2000)+"\n"))
	sparse := filepath.Join(dir, "huge.json")
	if err := os.WriteFile(sparse, []byte(`{"kind": "`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, 70_000_000); err != nil { // sparse: nothing is written or read
		t.Fatal(err)
	}
	stdin := strings.NewReader("")
	tests := []struct {
		name  string
		path  string
		opts  fileinput.Options
		check func(error) bool // the error's type, nil for any
		want  []string
	}{
		{"FIFO nobody writes", fifo, fileinput.Options{Stdin: stdin}, is[*fileinput.NotRegularError],
			[]string{"read " + fifo + ": it is a named pipe (FIFO), not a regular file", "or pipe it to standard input and name - in its place"}},
		{"FIFO, command without standard input", fifo, fileinput.Options{}, is[*fileinput.NotRegularError],
			[]string{"copy the data into a file and name that file"}},
		{"/dev/zero", "/dev/zero", fileinput.Options{}, is[*fileinput.NotRegularError], []string{"read /dev/zero: it is a character device, not a regular file"}},
		{"socket", sock, fileinput.Options{}, is[*fileinput.NotRegularError], []string{"it is a socket"}},
		{"broken symbolic link", broken, fileinput.Options{}, nil,
			[]string{"read " + broken + ": it is a broken symbolic link to /nonexistent/objects.yaml", "fix the link"}},
		{"missing file", filepath.Join(dir, "nope.yaml"), fileinput.Options{}, func(err error) bool { return errors.Is(err, fs.ErrNotExist) }, []string{"nope.yaml: file does not exist; check the path"}},
		{"binary file", binary, fileinput.Options{}, is[*fileinput.NotTextError], []string{"read " + binary + ": it is not a text file (byte 0x02 at offset 4)"}},
		{"not UTF-8", latin1, fileinput.Options{}, is[*fileinput.NotTextError], []string{"(byte 0xe9 at offset 9)"}},
		{"file over the limit", big, fileinput.Options{MaxFileSize: 1 << 10}, is[*fileinput.FileTooLargeError],
			[]string{"big.yaml: it holds 2004 bytes (2004B), over the limit of 1KiB on one input file", "raise the limit with --max-file-size (for example --max-file-size=2KiB)"}},
		{"70 MB file over the default limit", sparse, fileinput.Options{}, is[*fileinput.FileTooLargeError],
			[]string{"huge.json: it holds 70000000 bytes (66.8MiB), over the limit of 64MiB", "--max-file-size=128MiB"}},
		{"standard input over the limit", "-", fileinput.Options{MaxFileSize: 100, Stdin: strings.NewReader(strings.Repeat("x", 101))},
			is[*fileinput.FileTooLargeError], []string{"read standard input: it holds more than 100B, over the limit of 100B"}},
		{"binary standard input", "-", fileinput.Options{Stdin: strings.NewReader("a: 1\n\x00")}, is[*fileinput.NotTextError],
			[]string{"read standard input: it is not a text file (byte 0x00 at offset 5)"}},
		{"standard input where none is read", "-", fileinput.Options{}, nil, []string{"this command does not read standard input; name a file instead of -"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := readWithin(t, context.Background(), []string{tc.path}, tc.opts)
			if err == nil {
				t.Fatal("ReadAll succeeded")
			}
			if tc.check != nil && !tc.check(err) {
				t.Errorf("error %v (%T) is not of the expected type", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func is[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

func TestReadAllAccepts(t *testing.T) {
	dir := filestest.Tree(t, map[string]string{"a.yaml": "name: café\n", "empty.yaml": ""})
	utf16 := filepath.Join(dir, "utf16.yaml")
	if err := os.WriteFile(utf16, []byte("\xff\xfea\x00:\x00 \x001\x00\n\x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	files, listings, err := readWithin(t, context.Background(),
		[]string{filepath.Join(dir, "a.yaml"), "-", filepath.Join(dir, "empty.yaml"), utf16},
		fileinput.Options{MaxFileSize: 100, Stdin: strings.NewReader(strings.Repeat("x", 100))})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 || string(files[0].Data) != "name: café\n" || files[0].Rel != "a.yaml" || files[1].Path != "-" ||
		files[1].Rel != "" || len(files[1].Data) != 100 || len(files[2].Data) != 0 {
		t.Errorf("files = %+v", files)
	}
	if len(listings) != 4 || listings[1].Folder || listings[1].Read != 1 {
		t.Errorf("listings = %+v", listings)
	}
	if _, err := fileinput.ReadAll(context.Background(), []string{"-", "-"}, fileinput.Options{Stdin: strings.NewReader("")},
		func(fileinput.File) error { return nil }); err == nil || !strings.Contains(err.Error(), "standard input (-) is named more than once") {
		t.Errorf("standard input named twice: %v", err)
	}
	if _, err := fileinput.ReadFile(context.Background(), dir, fileinput.Options{}); err == nil ||
		!strings.Contains(err.Error(), "read "+dir+": it is a folder; name the file itself") {
		t.Errorf("ReadFile of a folder: %v", err)
	}
}

// endless is standard input that never ends: each Read returns a chunk of YAML comment at once, and after
// the first it cancels the read's context.
type endless struct{ cancel context.CancelFunc }

func (e endless) Read(p []byte) (int, error) {
	defer e.cancel()
	return copy(p, bytes.Repeat([]byte("# x\n"), len(p)/4)), nil
}

// blocked is standard input whose Read blocks until the test ends.
type blocked struct{ release chan struct{} }

func (b blocked) Read([]byte) (int, error) {
	<-b.release
	return 0, io.EOF
}

func TestReadAllStopsWhenCancelled(t *testing.T) {
	tests := []struct {
		name  string
		stdin func(t *testing.T, cancel context.CancelFunc) io.Reader
		// cancelFirst cancels the context before the call; otherwise stdin cancels it, or the test once
		// the read has started.
		cancelFirst bool
	}{
		{name: "cancelled before the call", cancelFirst: true,
			stdin: func(*testing.T, context.CancelFunc) io.Reader { return strings.NewReader("a: 1\n") }},
		{name: "standard input that never ends, between two chunks",
			stdin: func(_ *testing.T, cancel context.CancelFunc) io.Reader { return endless{cancel} }},
		{name: "standard input blocked in a read",
			stdin: func(t *testing.T, cancel context.CancelFunc) io.Reader {
				b := blocked{release: make(chan struct{})}
				t.Cleanup(func() { close(b.release) })
				cancel() // the read is abandoned whether or not it has started
				return b
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			stop := func() { cancel(errors.New("interrupt signal received")) }
			stdin := tc.stdin(t, stop)
			if tc.cancelFirst {
				stop()
			}
			_, _, err := readWithin(t, ctx, []string{"-"}, fileinput.Options{MaxFileSize: 1 << 30, Stdin: stdin})
			if !errors.Is(err, context.Canceled) || err.Error() != "read standard input: stopped: interrupt signal received (context canceled)" {
				t.Fatalf("error = %v, want one saying the read stopped, and why", err)
			}
		})
	}
}

func TestEmptyError(t *testing.T) {
	dir := filestest.Tree(t, map[string]string{"a.yaml": "# nothing\n", "b.yaml": ""})
	empty := t.TempDir()
	broken := t.TempDir()
	filestest.Symlink(t, "gone.yaml", filepath.Join(broken, "a.yaml"))
	opts := fileinput.Options{Exts: []string{".yaml", ".yml", ".json"}, Stdin: strings.NewReader("")}
	_, listings, err := readWithin(t, context.Background(), []string{"-", filepath.Join(dir, "a.yaml"), dir, empty, broken}, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := (&fileinput.EmptyError{What: "Kubernetes objects", Listings: listings}).Error()
	want := "no Kubernetes objects found in standard input (holds none), " + dir + "/a.yaml (holds none), folder " + dir +
		" (2 files read, none holding any), folder " + empty + " (no regular *.yaml, *.yml or *.json file in it), folder " + broken +
		" (no regular *.yaml, *.yml or *.json file in it; 1 entries skipped, see the warnings); check the paths given, or pass --allow-empty if finding none is expected"
	if got != want {
		t.Errorf("EmptyError =\n%s\nwant\n%s", got, want)
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
		got, err := fileinput.ParseSize(tc.in)
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
		if back, err := fileinput.ParseSize(fileinput.FormatSize(n)); err != nil || back != n {
			t.Errorf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, fileinput.FormatSize(n), back, err)
		}
	}
}
