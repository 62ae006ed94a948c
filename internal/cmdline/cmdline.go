// Package cmdline is the frame every apodex command stands in: a flag set
// whose flags may follow the arguments and whose help shows each value's
// form, usage errors and the one mapping of errors to exit codes, the home
// directory and run lookup, duration and size values, the signal handling
// that stops a run resumably, and exact JSON output.
//
// Exit codes: 0 success; 1 the outcome was a failure (or a lookup failed);
// 2 usage or configuration error. CodeOf is the only place errors become
// codes; ErrorLine is the one line the user sees of an error.
package cmdline

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/apodex/apodex/internal/run"
	"github.com/apodex/apodex/internal/runview"
	"github.com/apodex/apodex/internal/termtext"
)

// Exit codes.
const (
	ExitOK     = 0
	ExitFailed = 1
	ExitUsage  = 2
)

// Errors that carry an exit code.
type (
	// UsageError: the command line is wrong (exit 2).
	UsageError struct{ msg string }
	// ExitError: the outcome was already printed; only the code is left.
	ExitError int
)

func (e *UsageError) Error() string { return e.msg }
func (e ExitError) Error() string   { return fmt.Sprintf("exit %d", int(e)) }

func Usagef(format string, args ...any) error { return &UsageError{fmt.Sprintf(format, args...)} }

// CodeOf is the one place errors become exit codes.
func CodeOf(err error) int {
	var (
		ue   *UsageError
		ce   *run.ConfigError
		code ExitError
	)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.As(err, &code):
		return int(code)
	case errors.As(err, &ue), errors.As(err, &ce), errors.Is(err, runview.ErrNotFound):
		return ExitUsage
	default:
		return ExitFailed
	}
}

// ErrorLine is what the user sees of err: one line, or nothing when the
// command printed the outcome itself.
func ErrorLine(err error) string {
	var code ExitError
	if err == nil || errors.Is(err, flag.ErrHelp) || errors.As(err, &code) {
		return ""
	}
	return strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "\n  ")
}

// WriteJSON prints v as indented JSON, exactly: JSON escapes C0 controls
// itself, termtext.JSON the C1 and bidirectional ones.
func WriteJSON(w io.Writer, v any) {
	enc := json.NewEncoder(termtext.JSON(w))
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

type stdinKey struct{}

// WithStdin gives the commands that read standard input (run -, attach)
// r as it: main passes the process's, a test its own. Without it they
// read nothing.
func WithStdin(ctx context.Context, r io.Reader) context.Context {
	return context.WithValue(ctx, stdinKey{}, r)
}

// Stdin is the standard input WithStdin gave ctx, else an empty one.
func Stdin(ctx context.Context) io.Reader {
	if r, ok := ctx.Value(stdinKey{}).(io.Reader); ok && r != nil {
		return r
	}
	return strings.NewReader("")
}
