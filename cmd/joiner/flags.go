package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/joiner-dev/joiner/fileinput"
	"github.com/joiner-dev/joiner/policy/offline"
)

// runSubcommand runs the subcommand args[0] of the command name from commands, each given the
// arguments after it. No subcommand prints usage to stderr (exit 2), -h, --help and help print it to
// stdout (exit 0), and an unknown one is an error naming it (exit 2).
func runSubcommand(name, usage string, args []string, stdout, stderr io.Writer, commands map[string]func(args []string) int) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	if run, ok := commands[args[0]]; ok {
		return run(args[1:])
	}
	fmt.Fprintf(stderr, "%s: unknown command %q\n\n%s", name, args[0], usage)
	return 2
}

// inputFlags are the flags of the one input layer (package fileinput) that every command reading files
// shares: --max-file-size and --allow-empty.
type inputFlags struct {
	maxFileSize byteSize
	allowEmpty  bool
}

// bindMaxFileSize defines --max-file-size on fs.
func (in *inputFlags) bindMaxFileSize(fs *flag.FlagSet) {
	in.maxFileSize = byteSize(fileinput.DefaultMaxFileSize)
	fs.Var(&in.maxFileSize, "max-file-size", "size limit of each input file and of standard input, such as 64Mi, 512Ki or 1Gi")
}

// bind defines --max-file-size and --allow-empty on fs; empty says what finding nothing means.
func (in *inputFlags) bind(fs *flag.FlagSet, empty string) {
	in.bindMaxFileSize(fs)
	fs.BoolVar(&in.allowEmpty, "allow-empty", false, "succeed when "+empty+" (by default that is an error, so a wrong path fails)")
}

// loadOptions are the flags as offline.LoadOptions; warnings about skipped folder entries go to
// warnings.
func (in *inputFlags) loadOptions(warnings io.Writer) offline.LoadOptions {
	return offline.LoadOptions{MaxFileSize: int64(in.maxFileSize), Warnings: warnings, AllowEmpty: in.allowEmpty}
}

// manifestFlags are the input flags of the commands that read manifests (joiner check, convert, policy
// check): -f, repeatable, plus the arguments after the flags; --max-file-size; --allow-empty.
type manifestFlags struct {
	inputFlags
	files stringList
}

// bind defines the flags on fs.
func (m *manifestFlags) bind(fs *flag.FlagSet) {
	fs.Var(&m.files, "f", "manifest file, folder or - for standard input (repeatable); only regular files are read")
	m.inputFlags.bind(fs, "the inputs hold no objects at all")
}

// paths are the manifests to read: the -f flags, then the arguments of fs after the flags.
func (m *manifestFlags) paths(fs *flag.FlagSet) []string {
	return append(m.files, fs.Args()...)
}

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// byteSize is a size flag: a byte count with an optional binary unit (fileinput.ParseSize).
type byteSize int64

func (b *byteSize) String() string { return fileinput.FormatSize(int64(*b)) }

func (b *byteSize) Set(v string) error {
	n, err := fileinput.ParseSize(v)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

// flagExit maps a flag parse error to an exit code: 0 for --help, 2 otherwise.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return 2
}
