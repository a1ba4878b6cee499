package template

import (
	"errors"
	"fmt"
)

// Error is a compile or render failure. Kind names the Python exception that
// Jinja2 raises in the same situation (TemplateSyntaxError,
// TemplateAssertionError, UndefinedError, TypeError, ValueError,
// SecurityError, ...); a template's raise_exception(msg) yields Kind
// "TemplateError" with Msg = msg. Limit failures have Kind "LimitError".
type Error struct {
	Kind string
	Msg  string
	Line int // 1-based template line, 0 when unknown
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("template: line %d: %s: %s", e.Line, e.Kind, e.Msg)
	}
	return fmt.Sprintf("template: %s: %s", e.Kind, e.Msg)
}

// ErrLimit is wrapped by every error raised because a render exceeded one of
// its Limits (output size, steps, nesting depth).
var ErrLimit = errors.New("template limit exceeded")

func (e *Error) Unwrap() error {
	if e.Kind == "LimitError" {
		return ErrLimit
	}
	return nil
}

func errf(kind, format string, args ...any) *Error {
	return &Error{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

func typeErrorf(format string, args ...any) *Error { return errf("TypeError", format, args...) }

func valueErrorf(format string, args ...any) *Error { return errf("ValueError", format, args...) }

func runtimeErrorf(format string, args ...any) *Error {
	return errf("TemplateRuntimeError", format, args...)
}

// withLine fills in the line of err if it has none yet.
func withLine(err error, line int) error {
	if err == nil {
		return nil
	}
	if e, ok := err.(*Error); ok && e.Line == 0 {
		e.Line = line
	}
	return err
}

// control-flow signals for {% break %} and {% continue %}; they never leave a
// for loop because the parser rejects them outside one.
var (
	errBreak    = errors.New("break")
	errContinue = errors.New("continue")
)
