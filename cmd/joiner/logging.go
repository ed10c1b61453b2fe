package main

import (
	"fmt"
	"io"
	"os"

	"github.com/go-logr/logr"
	zapraw "go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// newLogger builds the controller's logger as Karpenter's log settings say: the level of
// --log-level, the log written to every output of --log-output-paths and the logger's own errors
// to --log-error-output-paths. "stdout" and "stderr" name the writers given, anything else a file
// the log is appended to. close closes the files.
func (f controllerFlags) newLogger(stdout, stderr io.Writer) (log logr.Logger, close func(), err error) {
	var files []*os.File
	close = func() {
		for _, file := range files {
			_ = file.Close()
		}
	}
	open := func(paths []string, setting string) (io.Writer, error) {
		ws := make([]io.Writer, 0, len(paths))
		for _, p := range paths {
			switch p {
			case "stdout":
				ws = append(ws, stdout)
			case "stderr":
				ws = append(ws, stderr)
			default:
				file, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
				if err != nil {
					return nil, fmt.Errorf("--%s: open %s: %w", setting, p, err)
				}
				files = append(files, file)
				ws = append(ws, file)
			}
		}
		return io.MultiWriter(ws...), nil
	}
	out, err := open(f.karp.logOutputPaths, "log-output-paths")
	if err != nil {
		close()
		return logr.Logger{}, func() {}, err
	}
	errOut, err := open(f.karp.logErrorOutputPaths, "log-error-output-paths")
	if err != nil {
		close()
		return logr.Logger{}, func() {}, err
	}
	return zap.New(zap.Level(f.logLevel), zap.WriteTo(out), zap.RawZapOpts(zapraw.ErrorOutput(zapcore.AddSync(errOut)))), close, nil
}
