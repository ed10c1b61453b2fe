package convert

import (
	"bytes"
	"context"

	"github.com/joiner-dev/joiner/fileinput"
)

// stdinName is the path that names standard input.
const stdinName = fileinput.StdinPath

// manifestExts are the names of the files read from folders.
var manifestExts = []string{".yaml", ".yml", ".json"}

// Input is one file, or standard input, to convert.
type Input struct {
	// Name is the path the input was read from, or "-" for standard input.
	Name string
	// Rel is where the converted input goes in an output folder, relative to it: the file's name for a
	// file named on the command line, its path inside the folder for a file found in a folder, and
	// "stdin.yaml" for standard input.
	Rel string
	// Data is the input's content.
	Data []byte
}

// ReadInputs reads each path with the command-line tools' input layer (package fileinput): a regular
// file, a folder (walked recursively for its regular *.yaml, *.yml and *.json files, in lexical order) or
// "-" for opts.Stdin, which may be named once; opts.Exts is ignored. Each input is text within
// opts.MaxFileSize, and the read stops when ctx is done. It also returns what was found for each path, for
// a *fileinput.EmptyError when nothing is converted.
func ReadInputs(ctx context.Context, paths []string, opts fileinput.Options) ([]Input, []fileinput.Listing, error) {
	opts.Exts = manifestExts
	var out []Input
	listings, err := fileinput.ReadAll(ctx, paths, opts, func(f fileinput.File) error {
		rel := f.Rel
		if f.Path == stdinName {
			rel = "stdin.yaml"
		}
		out = append(out, Input{Name: f.Path, Rel: rel, Data: f.Data})
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, listings, nil
}

// chunk is one YAML document of an input, as text.
type chunk struct {
	// line is the 1-based line of the input where the document's text starts.
	line int
	text []byte
}

// splitDocuments splits YAML text on "---" lines. A document separator inside a block scalar is
// always indented, so a line starting with "---" is a separator. Empty documents are dropped;
// documents that hold only comments are kept, so the comments survive.
func splitDocuments(data []byte) []chunk {
	var out []chunk
	start, startLine, lineNo, offset := 0, 1, 0, 0
	flush := func(end int) {
		if text := data[start:end]; len(bytes.TrimSpace(text)) > 0 {
			out = append(out, chunk{line: startLine, text: text})
		}
	}
	for line := range bytes.Lines(data) {
		lineNo++
		end := offset + len(line)
		if isSeparator(line) {
			flush(offset)
			start, startLine = end, lineNo+1
		}
		offset = end
	}
	flush(len(data))
	return out
}

// isSeparator reports whether line is a YAML document separator: "---", optionally followed by
// blanks and a comment.
func isSeparator(line []byte) bool {
	rest, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("---"))
	if !ok {
		return false
	}
	rest = bytes.TrimLeft(rest, " \t")
	return len(rest) == 0 || rest[0] == '#'
}

// onlyComments reports whether text holds only blank lines and comments.
func onlyComments(text []byte) bool {
	for line := range bytes.Lines(text) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}
