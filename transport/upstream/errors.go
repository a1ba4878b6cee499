package upstream

import (
	"context"
	"errors"
	"fmt"
)

// DialError means the connection to the replica could not be established
// (refused, unreachable, DialTimeout passed): the request never left, so it is
// safe to retry on another replica.
type DialError struct {
	Addr string // the replica's host:port
	Err  error
}

func (e *DialError) Error() string { return "upstream " + e.Addr + ": dial: " + e.Err.Error() }
func (e *DialError) Unwrap() error { return e.Err }

// ClosedError means the replica closed or reset the connection before any
// byte of the response arrived (after the one transparent retry of a stale
// keep-alive connection). The engine may have received the request but
// started no answer, and an engine aborts a request whose connection closes,
// so a retry elsewhere sends the client nothing twice.
type ClosedError struct {
	Addr string
	Err  error
}

func (e *ClosedError) Error() string { return "upstream " + e.Addr + ": " + e.Err.Error() }
func (e *ClosedError) Unwrap() error { return e.Err }

var (
	// ErrHeadTimeout is wrapped by Do's error when Options.HeadTimeout passed
	// before the response head was complete. The connection is closed, so the
	// engine drops the request.
	ErrHeadTimeout = errors.New("timed out waiting for the response head")
	// ErrClosed is returned by Do after Pool.Close.
	ErrClosed = errors.New("upstream: pool closed")
	// errNoResponse is what a ClosedError wraps when the connection ended
	// before the first response byte.
	errNoResponse = errors.New("connection closed before any response byte")
)

// causer is a Context that tells its own cancellation cause.
type causer interface{ Cause() error }

// ctxError wraps the context's error, and its cause when that differs, so
// that errors.Is finds both context.Canceled and, say, a frontend's
// errClientGone.
func ctxError(addr string, ctx context.Context) error {
	err := ctx.Err()
	cause := context.Cause(ctx)
	if c, ok := ctx.(causer); ok {
		// A Context of its own type, which context.Cause cannot see into.
		cause = c.Cause()
	}
	if cause != nil && cause != err {
		return fmt.Errorf("upstream %s: %w: %w", addr, err, cause)
	}
	return fmt.Errorf("upstream %s: %w", addr, err)
}
