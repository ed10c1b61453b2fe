package offline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// DefaultMaxFileSize is the size limit of one input file, or of standard input, when LoadOptions.MaxFileSize
// is zero.
const DefaultMaxFileSize int64 = 64 << 20

// LoadOptions tune how LoadObjectsWithOptions and LoadPoliciesWithOptions read their inputs.
type LoadOptions struct {
	// MaxFileSize bounds each file and standard input, in bytes; zero or less means DefaultMaxFileSize.
	// A document or a line may be as long as its file: there is no other limit.
	MaxFileSize int64
	// Warnings receives one line for each folder entry that is skipped: a named pipe, a device, a socket,
	// a broken symbolic link or a symbolic link to a folder. Nil discards them.
	Warnings io.Writer
	// AllowEmpty lets LoadObjectsWithOptions find no objects at all. Otherwise that is an error naming what
	// was read, so that a check pointed at the wrong path fails. It does not apply to policies: loading
	// policies always fails when none is found.
	AllowEmpty bool
}

func (o LoadOptions) maxFileSize() int64 {
	if o.MaxFileSize <= 0 {
		return DefaultMaxFileSize
	}
	return o.MaxFileSize
}

func (o LoadOptions) warnf(format string, args ...any) {
	if o.Warnings != nil {
		fmt.Fprintf(o.Warnings, "warning: "+format+"\n", args...)
	}
}

// FileTooLargeError reports an input over LoadOptions.MaxFileSize.
type FileTooLargeError struct {
	// Path is the file, or "-" for standard input.
	Path string
	// Size is the file's size when known (a regular file), else 0: reading stopped at the limit.
	Size int64
	// Limit is the size limit in bytes.
	Limit int64
}

// Error names the file, the limit and the flag that raises it.
func (e *FileTooLargeError) Error() string {
	what := "more than " + FormatSize(e.Limit)
	if e.Size > 0 {
		what = fmt.Sprintf("%d bytes (%s)", e.Size, FormatSize(e.Size))
	}
	// Suggest the smallest power of two that holds the file, and at least twice the limit.
	suggest := int64(1) << 10
	for (suggest < e.Size || suggest < 2*e.Limit) && suggest < 1<<40 {
		suggest <<= 1
	}
	return fmt.Sprintf("read %s: it holds %s, over the limit of %s on one input file; if it is meant to be read, "+
		"raise the limit with --max-file-size (for example --max-file-size=%s)", displayName(e.Path), what,
		FormatSize(e.Limit), FormatSize(suggest))
}

func displayName(path string) string {
	if path == "-" {
		return "standard input"
	}
	return path
}

// FormatSize prints a byte count the way ParseSize reads it: 64MiB, 512KiB, 1GiB, or 1234B for a count that
// is not a whole number of KiB. Counts of at least a MiB that are not whole are rounded, as 66.8MiB.
func FormatSize(n int64) string {
	units := []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}}
	for _, u := range units {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	if n >= 1<<20 {
		return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + "MiB"
	}
	return strconv.FormatInt(n, 10) + "B"
}

// ParseSize reads a positive byte count: a whole number optionally followed by a binary unit, K, M or G
// (each may be written K, KB, Ki or KiB, in any case; 1K = 1KiB = 1024 bytes), or B for bytes.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: want a whole number of bytes with an optional unit, such as 64Mi, 512Ki or 1048576", s)
	}
	n, err := strconv.ParseInt(t[:i], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	var mult int64
	switch unit := strings.TrimSpace(t[i:]); strings.ToUpper(unit) {
	case "", "B":
		mult = 1
	case "K", "KB", "KI", "KIB":
		mult = 1 << 10
	case "M", "MB", "MI", "MIB":
		mult = 1 << 20
	case "G", "GB", "GI", "GIB":
		mult = 1 << 30
	default:
		return 0, fmt.Errorf("size %q: unknown unit %q; use B, Ki, Mi or Gi", s, unit)
	}
	if n <= 0 {
		return 0, fmt.Errorf("size %q: must be larger than zero", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return n * mult, nil
}

// input is one file to read: a path named on the command line, a file found in a folder, or "-".
type input struct {
	path string
	// inFolder is set for files found by walking a folder: only regular files are read from folders.
	inFolder bool
}

// listing is what listInputs found for one path.
type listing struct {
	path    string
	folder  bool
	files   []input
	skipped int // folder entries with a wanted extension that are not regular files
	read    int // files read, set by readAll
}

// listInputs returns path itself when it is not a folder, else the regular files under it whose names end
// with one of exts, sorted, skipping hidden subfolders. Folder entries that are not regular files (named
// pipes, devices, sockets, broken symbolic links, symbolic links to folders) are reported to
// opts.Warnings and skipped, so that a FIFO in a folder cannot block the read.
func listInputs(path string, opts LoadOptions, exts ...string) (listing, error) {
	l := listing{path: path}
	if path == "-" {
		l.files = []input{{path: path}}
		return l, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		if target, lerr := os.Readlink(path); lerr == nil {
			return l, fmt.Errorf("read %s: broken symbolic link to %s: %w", path, target, err)
		}
		return l, fmt.Errorf("read %s: %w", path, err)
	}
	if !info.IsDir() {
		l.files = []input{{path: path}}
		return l, nil
	}
	l.folder = true
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != path && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !hasSuffix(d.Name(), exts) {
			return nil
		}
		mode := d.Type()
		if mode&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			info, err := os.Stat(p)
			switch {
			case err != nil:
				l.skipped++
				opts.warnf("skipped %s: broken symbolic link to %s (%v)", p, target, err)
				return nil
			case info.IsDir():
				l.skipped++
				opts.warnf("skipped %s: symbolic link to the folder %s; links to folders are not followed, pass the folder itself", p, target)
				return nil
			}
			mode = info.Mode().Type()
		}
		if !mode.IsRegular() {
			l.skipped++
			opts.warnf("%s", notRegular(p, mode))
			return nil
		}
		l.files = append(l.files, input{path: p, inFolder: true})
		return nil
	})
	if err != nil {
		return l, fmt.Errorf("walk %s: %w", path, err)
	}
	return l, nil
}

func hasSuffix(name string, exts []string) bool {
	for _, ext := range exts {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// describeMode names the kind of a file that is not regular.
func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO), which may never end"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a folder"
	default:
		return "not a regular file"
	}
}

// notRegular is the warning for a folder entry that is not a regular file.
func notRegular(path string, mode fs.FileMode) string {
	return fmt.Sprintf("skipped %s: %s; only regular files are read from a folder (name it with -f to read it anyway)", path, describeMode(mode))
}

// skippedError is a folder entry that turned out not to be a regular file once opened (it was replaced
// after the folder was listed); readAll reports and skips it.
type skippedError struct {
	path string
	mode fs.FileMode
}

func (e *skippedError) Error() string { return notRegular(e.path, e.mode) }

// readInput reads one input, or stdin for "-", within limit bytes. A file found in a folder is opened
// without blocking and read only if it is still a regular file; a file named explicitly is read whatever it
// is (a pipe from `<(...)`, a FIFO, /dev/stdin), up to the limit.
//
// The open and the read run in a goroutine, so a cancelled ctx (Ctrl-C, SIGTERM) ends the wait at once
// even when they block: standard input or a FIFO whose writer never comes or never finishes. An opened
// file is closed, which ends a pending read of a pipe or FIFO; what cannot be unblocked (an open waiting
// for a FIFO's writer, a read of standard input) is abandoned, to end with the process.
func readInput(ctx context.Context, in input, stdin io.Reader, limit int64) ([]byte, error) {
	if ctx.Err() != nil {
		return nil, interrupted(ctx, in.path)
	}
	r := &pendingRead{in: in, stdin: stdin, limit: limit}
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := r.read()
		done <- result{data, err}
	}()
	select {
	case res := <-done:
		return res.data, res.err
	case <-ctx.Done():
		r.stop()
		return nil, interrupted(ctx, in.path)
	}
}

// pendingRead is one readInput call, shared by the reading goroutine and the caller that may stop it.
type pendingRead struct {
	in    input
	stdin io.Reader
	limit int64

	mu      sync.Mutex
	file    *os.File // the opened input, once open
	stopped bool     // the caller gave up: close the file, now or as soon as it is opened
}

// stop closes the input if it is open, or makes read close it once opened.
func (r *pendingRead) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.file != nil {
		_ = r.file.Close()
	}
}

// opened records f; it returns false when the read was stopped already.
func (r *pendingRead) opened(f *os.File) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.file = f
	return !r.stopped
}

func (r *pendingRead) read() ([]byte, error) {
	path := r.in.path
	if path == "-" {
		if r.stdin == nil {
			return nil, errors.New("read -: no standard input available")
		}
		return readLimited(r.stdin, path, 0, r.limit)
	}
	flags := os.O_RDONLY
	if r.in.inFolder {
		flags |= syscall.O_NONBLOCK // never wait for a FIFO's writer
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	if !r.opened(f) {
		return nil, fmt.Errorf("read %s: %w", path, context.Canceled)
	}
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if r.in.inFolder && !info.Mode().IsRegular() {
		return nil, &skippedError{path: path, mode: info.Mode().Type()}
	}
	if info.IsDir() {
		return nil, fmt.Errorf("read %s: is a folder", path)
	}
	var size int64
	if info.Mode().IsRegular() {
		size = info.Size()
	}
	return readLimited(f, path, size, r.limit)
}

// readLimited reads r to its end, failing with *FileTooLargeError past limit bytes. size is the expected
// size (a regular file's), or 0 when unknown.
func readLimited(r io.Reader, path string, size, limit int64) ([]byte, error) {
	if size > limit {
		return nil, &FileTooLargeError{Path: path, Size: size, Limit: limit}
	}
	var buf bytes.Buffer
	if size > 0 {
		buf.Grow(int(size) + bytes.MinRead)
	}
	n, err := buf.ReadFrom(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if n > limit {
		return nil, &FileTooLargeError{Path: path, Limit: limit}
	}
	return buf.Bytes(), nil
}

// interrupted is the error for a read that ctx stopped, with ctx's cause (such as the signal that stopped
// the command) when it has one.
func interrupted(ctx context.Context, path string) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, ctx.Err()) {
		return fmt.Errorf("read %s: stopped: %w (%w)", displayName(path), ctx.Err(), cause)
	}
	return fmt.Errorf("read %s: stopped: %w", displayName(path), ctx.Err())
}
