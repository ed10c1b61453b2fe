package fileinput

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// FileTooLargeError reports an input over Options.MaxFileSize.
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
		"raise the limit with --max-file-size (for example --max-file-size=%s)", DisplayName(e.Path), what,
		FormatSize(e.Limit), FormatSize(suggest))
}

// NotRegularError reports a path named on the command line that is not a regular file: a named pipe, a
// device, a socket. Such a file may block a read for ever (a FIFO nobody writes) or never end
// (/dev/zero), so it is refused before anything is read from it.
type NotRegularError struct {
	Path string
	Mode fs.FileMode
	// StdinAllowed says the command reads standard input for "-", which the error then suggests.
	StdinAllowed bool
}

// Error names the file, what it is, and what to do instead.
func (e *NotRegularError) Error() string {
	fix := "copy the data into a file and name that file"
	if e.StdinAllowed {
		fix += ", or pipe it to standard input and name - in its place"
	}
	return fmt.Sprintf("read %s: it is %s, not a regular file; only regular files are read (a pipe or a device "+
		"may never end): %s", e.Path, describeMode(e.Mode), fix)
}

// NotTextError reports an input that is not UTF-8 text: a binary file named by mistake.
type NotTextError struct {
	// Path is the file, or "-" for standard input.
	Path string
	// Offset is where the first byte that text cannot hold is; Byte is that byte.
	Offset int
	Byte   byte
}

// Error names the file and the offending byte.
func (e *NotTextError) Error() string {
	return fmt.Sprintf("read %s: it is not a text file (byte 0x%02x at offset %d); pass the UTF-8 YAML, JSON or Rego "+
		"file meant here, not a binary or an archive", DisplayName(e.Path), e.Byte, e.Offset)
}

// EmptyError reports inputs that held nothing to work on: a command pointed at the wrong path should fail,
// unless its --allow-empty flag says that nothing is expected.
type EmptyError struct {
	// What is what was looked for, plural: "Kubernetes objects", "policies or *_test.rego files".
	What string
	// Listings are the paths read, as ReadAll returned them.
	Listings []Listing
}

// Error explains, for each path, why it gave nothing, and names --allow-empty.
func (e *EmptyError) Error() string {
	parts := make([]string, len(e.Listings))
	for i, l := range e.Listings {
		var why string
		switch {
		case !l.Folder:
			why = "holds none"
		case l.Read == 0:
			why = "no regular " + patterns(l.exts) + " file in it"
		default:
			why = fmt.Sprintf("%d files read, none holding any", l.Read)
		}
		if l.Skipped > 0 {
			why += fmt.Sprintf("; %d entries skipped, see the warnings", l.Skipped)
		}
		name := DisplayName(l.Path)
		if l.Folder {
			name = "folder " + name
		}
		parts[i] = fmt.Sprintf("%s (%s)", name, why)
	}
	return fmt.Sprintf("no %s found in %s; check the paths given, or pass --allow-empty if finding none is expected",
		e.What, strings.Join(parts, ", "))
}

// patterns prints extensions as glob patterns: "*.yaml, *.yml or *.json".
func patterns(exts []string) string {
	if len(exts) == 0 {
		return "*"
	}
	globs := make([]string, len(exts))
	for i, ext := range exts {
		globs[i] = "*" + ext
	}
	if len(globs) == 1 {
		return globs[0]
	}
	return strings.Join(globs[:len(globs)-1], ", ") + " or " + globs[len(globs)-1]
}

// DisplayName is how errors name a path: "standard input" for "-", else the path.
func DisplayName(path string) string {
	if path == StdinPath {
		return "standard input"
	}
	return path
}

// describeMode names the kind of a file that is not regular.
func describeMode(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
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

// skippedError is a folder entry that is not a regular file; ReadAll reports and skips it.
type skippedError struct {
	path string
	mode fs.FileMode
}

func (e *skippedError) Error() string {
	return fmt.Sprintf("skipped %s: %s; only regular files are read from a folder", e.path, describeMode(e.mode))
}

// Interrupted is the error for a read that ctx stopped. It names the input and ctx's cause when it has one
// (the signal that stopped the command, as signal.NotifyContext records it), and wraps ctx.Err().
func Interrupted(ctx context.Context, path string) error {
	name := DisplayName(path)
	switch cause := context.Cause(ctx); {
	case cause == nil || cause == ctx.Err():
		return fmt.Errorf("read %s: stopped: %w", name, ctx.Err())
	case errors.Is(cause, ctx.Err()): // signal.NotifyContext's cause is such an error
		return fmt.Errorf("read %s: stopped: %w", name, cause)
	default:
		return fmt.Errorf("read %s: stopped: %w (%w)", name, cause, ctx.Err())
	}
}
