package offline

import (
	"bytes"
	"context"
	"io"

	"github.com/joiner-dev/joiner/fileinput"
)

// LoadOptions tune how LoadObjectsWithOptions and LoadPoliciesWithOptions read their inputs, through the
// command-line tools' one input layer (package fileinput): regular files only, standard input only for
// "-", text within a size limit, reads that stop when the context is done.
type LoadOptions struct {
	// MaxFileSize bounds each file and standard input, in bytes; zero or less means
	// fileinput.DefaultMaxFileSize. A document or a line may be as long as its file: there is no other
	// limit.
	MaxFileSize int64
	// Warnings receives one line for each folder entry that is skipped: a named pipe, a device, a socket,
	// a broken symbolic link or a symbolic link to a folder. Nil discards them.
	Warnings io.Writer
	// AllowEmpty lets LoadObjectsWithOptions find no objects at all, and RunTestsWithOptions find neither
	// policies nor tests. Otherwise that is a *fileinput.EmptyError naming what was read, so that a
	// command pointed at the wrong path fails. Loading policies for a check always fails when none is found.
	AllowEmpty bool
}

// input is o as the input layer's options, reading stdin for "-" (nil refuses it) and the files whose
// names end with one of exts from folders.
func (o LoadOptions) input(stdin io.Reader, exts []string) fileinput.Options {
	return fileinput.Options{MaxFileSize: o.MaxFileSize, Stdin: stdin, Exts: exts, Warnings: o.Warnings}
}

// objectExts are the names of the files read from folders of objects, policyExts of policies, testExts of
// Rego tests.
var (
	objectExts = []string{".yaml", ".yml", ".json"}
	policyExts = []string{".yaml", ".yml"}
	testExts   = []string{"_test.rego"}
)

// readAll reads every input of paths with the input layer and calls each with every document read,
// checking ctx between documents so that a signal stops a long load between two of them.
func readAll(ctx context.Context, paths []string, stdin io.Reader, opts LoadOptions, exts []string, each func(document) error) ([]fileinput.Listing, error) {
	return fileinput.ReadAll(ctx, paths, opts.input(stdin, exts), func(f fileinput.File) error {
		docs, err := splitFile(f.Path, f.Data)
		if err != nil {
			return err
		}
		for _, d := range docs {
			if ctx.Err() != nil {
				return fileinput.Interrupted(ctx, f.Path)
			}
			if err := each(d); err != nil {
				return err
			}
		}
		return nil
	})
}

// splitFile splits one input into its documents: a stream of JSON values, or YAML documents.
func splitFile(path string, data []byte) ([]document, error) {
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return splitJSON(path, trimmed)
	}
	return splitDocuments(path, data), nil
}
