// Package fileinput is the one input layer of Joiner's command-line tools (joiner check, convert, policy
// check, policy test, disruption plan): it reads the files and folders a command is given, and standard
// input when "-" is named, safely. Only regular files are read, never a named pipe or a device; every
// input is bounded by a size limit; binary content is refused; and a read stops as soon as its context
// is done (Ctrl-C, SIGTERM). It parses nothing: callers split and decode the bytes it returns, and decide
// whether what they found is empty (EmptyError).
package fileinput

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"syscall"
	"unicode/utf8"
)

// StdinPath is the path that names standard input.
const StdinPath = "-"

// chunkSize is how much one read asks for; the context is checked between reads.
const chunkSize = 1 << 20

// Options tune ReadAll and ReadFile. The zero value reads regular files of any name from folders, up to
// DefaultMaxFileSize each, and refuses "-".
type Options struct {
	// MaxFileSize bounds each file and standard input, in bytes; zero or less means DefaultMaxFileSize.
	MaxFileSize int64
	// Stdin is read for the path "-", which may be named once. Nil makes "-" an error.
	Stdin io.Reader
	// Exts are the name endings of the files read from folders, matched without regard to case, such as
	// ".yaml" or "_test.rego". Empty means every regular file. A file named explicitly is read whatever
	// its name.
	Exts []string
	// Warnings receives one line for each folder entry that is skipped: a named pipe, a device, a socket,
	// a broken symbolic link or a symbolic link to a folder. Nil discards them.
	Warnings io.Writer
}

func (o Options) maxFileSize() int64 {
	if o.MaxFileSize <= 0 {
		return DefaultMaxFileSize
	}
	return o.MaxFileSize
}

func (o Options) warnf(format string, args ...any) {
	if o.Warnings != nil {
		fmt.Fprintf(o.Warnings, "warning: "+format+"\n", args...)
	}
}

// File is one input read.
type File struct {
	// Path is the file's path (a path given, or one found under a folder given), or "-" for standard input.
	Path string
	// Rel is the file's path relative to the folder given for a file found in it, the base name of a file
	// named explicitly, and "" for standard input.
	Rel string
	// Data is the file's content, valid UTF-8 (or UTF-16 with a byte order mark).
	Data []byte
}

// Listing is what ReadAll found for one path it was given.
type Listing struct {
	// Path is the path as given.
	Path string
	// Folder says the path is a folder, walked for its files.
	Folder bool
	// Read counts the files read; Skipped the folder entries that are not regular files.
	Read, Skipped int

	exts []string
}

// ReadAll reads each path in order, and calls each with every file read: a file, a folder (walked
// recursively, in lexical order, for the regular files whose names end with one of opts.Exts; hidden
// subfolders and entries that are not regular files are skipped, with a warning for the latter), or "-"
// for opts.Stdin. A path named explicitly must be a regular file (*NotRegularError) or a folder. Each
// input must be text within opts.MaxFileSize (*NotTextError, *FileTooLargeError). When ctx is done, the
// read in progress stops at once: a file between two chunks, standard input by abandoning the goroutine
// blocked in it (to end with the process), and the error says so (Interrupted). It returns what it found
// for each path, for EmptyError.
func ReadAll(ctx context.Context, paths []string, opts Options, each func(File) error) ([]Listing, error) {
	listings := make([]Listing, 0, len(paths))
	stdinNamed := false
	for _, path := range paths {
		if path == StdinPath {
			if stdinNamed {
				return nil, errors.New("standard input (-) is named more than once; name it once")
			}
			stdinNamed = true
		}
		l, entries, err := list(path, opts)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			data, err := read(ctx, e, opts)
			var skipped *skippedError
			if errors.As(err, &skipped) {
				l.Skipped++
				opts.warnf("%v", err)
				continue
			}
			if err != nil {
				return nil, err
			}
			l.Read++
			if err := each(File{Path: e.path, Rel: e.rel, Data: data}); err != nil {
				return nil, err
			}
		}
		listings = append(listings, l)
	}
	return listings, nil
}

// ReadFile reads one file named explicitly (not a folder; "-" only when opts.Stdin is set), as ReadAll
// does.
func ReadFile(ctx context.Context, path string, opts Options) ([]byte, error) {
	var data []byte
	listings, err := ReadAll(ctx, []string{path}, opts, func(f File) error {
		data = f.Data
		return nil
	})
	if err != nil {
		return nil, err
	}
	if listings[0].Folder {
		return nil, fmt.Errorf("read %s: it is a folder; name the file itself", path)
	}
	return data, nil
}

// read reads one entry, or standard input for "-".
func read(ctx context.Context, e entry, opts Options) ([]byte, error) {
	if ctx.Err() != nil {
		return nil, Interrupted(ctx, e.path)
	}
	if e.path == StdinPath {
		return readStdin(ctx, opts.Stdin, opts.maxFileSize())
	}
	// O_NONBLOCK: should the entry have been replaced by a FIFO since it was listed, the open does not wait
	// for a writer, and the check below refuses it.
	f, err := os.OpenFile(e.path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", e.path, pathErr(err))
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", e.path, pathErr(err))
	}
	if mode := info.Mode(); !mode.IsRegular() {
		if e.inFolder {
			return nil, &skippedError{path: e.path, mode: mode.Type()}
		}
		return nil, &NotRegularError{Path: e.path, Mode: mode.Type(), StdinAllowed: opts.Stdin != nil}
	}
	limit := opts.maxFileSize()
	if info.Size() > limit {
		return nil, &FileTooLargeError{Path: e.path, Size: info.Size(), Limit: limit}
	}
	data, err := readChunks(ctx, f, e.path, info.Size(), limit)
	if err != nil {
		return nil, err
	}
	return data, checkText(e.path, data)
}

// readStdin reads standard input in a goroutine, so that a done ctx ends the wait even while a read of a
// pipe nobody writes to or closes is blocked; that goroutine is then abandoned.
func readStdin(ctx context.Context, stdin io.Reader, limit int64) ([]byte, error) {
	if stdin == nil {
		return nil, errors.New("read standard input: this command does not read standard input; name a file instead of -")
	}
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := readChunks(ctx, stdin, StdinPath, 0, limit)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, r.err
		}
		return r.data, checkText(StdinPath, r.data)
	case <-ctx.Done():
		return nil, Interrupted(ctx, StdinPath)
	}
}

// readChunks reads r to its end in chunks of chunkSize, checking ctx between them, and fails with
// *FileTooLargeError past limit bytes. size is the expected size (a regular file's), or 0 when unknown.
func readChunks(ctx context.Context, r io.Reader, path string, size, limit int64) ([]byte, error) {
	buf := make([]byte, 0, min(size, limit)+1)
	for {
		if ctx.Err() != nil {
			return nil, Interrupted(ctx, path)
		}
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, chunkSize)
		}
		n, err := r.Read(buf[len(buf):min(cap(buf), len(buf)+chunkSize)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, &FileTooLargeError{Path: path, Limit: limit}
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", DisplayName(path), err)
		}
	}
}

// checkText refuses data that is not UTF-8 text: a control byte that text files do not hold (NUL and the
// other C0 controls but tab, line feed, vertical tab, form feed, carriage return and escape), or an
// invalid UTF-8 sequence. Data that starts with a UTF-16 byte order mark is accepted as it is (YAML
// allows UTF-16).
func checkText(path string, data []byte) error {
	if bytes.HasPrefix(data, []byte{0xff, 0xfe}) || bytes.HasPrefix(data, []byte{0xfe, 0xff}) {
		return nil
	}
	for i, b := range data {
		if b < 0x20 && binaryControl[b] {
			at := firstInvalid(data[:i], i)
			return &NotTextError{Path: path, Offset: at, Byte: data[at]}
		}
	}
	if utf8.Valid(data) {
		return nil
	}
	i := firstInvalid(data, -1)
	return &NotTextError{Path: path, Offset: i, Byte: data[i]}
}

// binaryControl marks the C0 control bytes that only binary data holds.
var binaryControl = func() (m [0x20]bool) {
	for b := range m {
		m[b] = true
	}
	for _, b := range []byte{'\t', '\n', '\v', '\f', '\r', 0x1b} {
		m[b] = false
	}
	return m
}()

// firstInvalid returns the offset of the first byte of data that does not start a valid UTF-8 sequence,
// or otherwise when there is none.
func firstInvalid(data []byte, otherwise int) int {
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return otherwise
}

// pathErr drops the operation and path that an *fs.PathError repeats, since the caller names the path.
func pathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
