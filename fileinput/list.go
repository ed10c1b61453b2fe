package fileinput

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// entry is one file to read: a path named on the command line, a file found in a folder, or "-".
type entry struct {
	path string
	rel  string
	// inFolder is set for files found by walking a folder: one that is not a regular file is skipped with
	// a warning rather than refused.
	inFolder bool
}

// list returns path itself when it is a regular file or "-", else the files to read under the folder it
// names. Nothing is opened: a path that is not a regular file or a folder is refused here.
func list(path string, opts Options) (Listing, []entry, error) {
	l := Listing{Path: path, exts: opts.Exts}
	if path == StdinPath {
		return l, []entry{{path: path}}, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return l, nil, statError(path, err)
	}
	switch {
	case info.IsDir():
		l.Folder = true
		entries, skipped, err := walk(path, opts)
		l.Skipped = skipped
		return l, entries, err
	case !info.Mode().IsRegular():
		return l, nil, &NotRegularError{Path: path, Mode: info.Mode().Type(), StdinAllowed: opts.Stdin != nil}
	}
	return l, []entry{{path: path, rel: filepath.Base(path)}}, nil
}

// statError explains why a path named on the command line cannot be read.
func statError(path string, err error) error {
	if target, lerr := os.Readlink(path); lerr == nil {
		return fmt.Errorf("read %s: it is a broken symbolic link to %s (%w); fix the link or name the file it should point to",
			path, target, pathErr(err))
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("read %s: %w; check the path", path, fs.ErrNotExist)
	}
	return fmt.Errorf("read %s: %w", path, pathErr(err))
}

// walk lists the regular files under root whose names end with one of opts.Exts, in lexical order,
// skipping hidden subfolders. Entries that are not regular files (named pipes, devices, sockets, broken
// symbolic links, symbolic links to folders) are reported to opts.Warnings and counted, so that a FIFO in
// a folder cannot block the read.
func walk(root string, opts Options) ([]entry, int, error) {
	var entries []entry
	skipped := 0
	skip := func(format string, args ...any) error {
		skipped++
		opts.warnf(format, args...)
		return nil
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !hasExt(d.Name(), opts.Exts) {
			return nil
		}
		mode := d.Type()
		if mode&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			info, err := os.Stat(p)
			switch {
			case err != nil:
				return skip("skipped %s: broken symbolic link to %s (%v)", p, target, pathErr(err))
			case info.IsDir():
				return skip("skipped %s: symbolic link to the folder %s; links to folders are not followed, pass the folder itself", p, target)
			}
			mode = info.Mode().Type()
		}
		if !mode.IsRegular() {
			return skip("%v", &skippedError{path: p, mode: mode})
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		entries = append(entries, entry{path: p, rel: rel, inFolder: true})
		return nil
	})
	if err != nil {
		return nil, skipped, fmt.Errorf("read folder %s: %w", root, err)
	}
	return entries, skipped, nil
}

// hasExt reports whether name ends with one of exts, in any case; every name does when exts is empty.
func hasExt(name string, exts []string) bool {
	if len(exts) == 0 {
		return true
	}
	lower := strings.ToLower(name)
	for _, ext := range exts {
		if strings.HasSuffix(lower, strings.ToLower(ext)) {
			return true
		}
	}
	return false
}
