package convert

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// MaxInputSize is the size limit of one input file, or of standard input.
const MaxInputSize = 64 << 20

// stdinName is the path that names standard input.
const stdinName = "-"

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

// ReadInputs reads each path: a file, a folder (walked recursively for its regular *.yaml, *.yml and
// *.json files, in lexical order) or "-" for standard input, which may be named once.
func ReadInputs(paths []string, stdin io.Reader) ([]Input, error) {
	var out []Input
	readStdin := false
	for _, p := range paths {
		if p == stdinName {
			if readStdin {
				return nil, fmt.Errorf("standard input (-) is named twice; name it once")
			}
			readStdin = true
			data, err := readLimited(stdin, "standard input")
			if err != nil {
				return nil, err
			}
			out = append(out, Input{Name: stdinName, Rel: "stdin.yaml", Data: data})
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		if !fi.IsDir() {
			in, err := readFile(p, filepath.Base(p))
			if err != nil {
				return nil, err
			}
			out = append(out, in)
			continue
		}
		files, err := manifestFiles(p)
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			rel, err := filepath.Rel(p, f)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", f, err)
			}
			in, err := readFile(f, rel)
			if err != nil {
				return nil, err
			}
			out = append(out, in)
		}
	}
	return out, nil
}

// manifestFiles lists the regular manifest files under dir, sorted.
func manifestFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && isManifest(path) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list folder %s: %w", dir, err)
	}
	slices.Sort(files)
	return files, nil
}

// isManifest reports whether a file name has a manifest extension.
func isManifest(name string) bool {
	ext := strings.ToLower(filepath.Ext(name))
	return ext == ".yaml" || ext == ".yml" || ext == ".json"
}

func readFile(path, rel string) (Input, error) {
	f, err := os.Open(path)
	if err != nil {
		return Input{}, fmt.Errorf("read %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	data, err := readLimited(f, path)
	if err != nil {
		return Input{}, err
	}
	return Input{Name: path, Rel: rel, Data: data}, nil
}

// readLimited reads r up to MaxInputSize.
func readLimited(r io.Reader, name string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxInputSize+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(data) > MaxInputSize {
		return nil, fmt.Errorf("read %s: larger than the limit of %d MiB", name, MaxInputSize>>20)
	}
	return data, nil
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
