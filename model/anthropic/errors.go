package anthropic

import (
	"net/http"

	"github.com/inferrail/inferrail/model/openai"
)

// Error types of Anthropic's error shape
// (https://docs.anthropic.com/en/api/errors).
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypePermission     = "permission_error"
	TypeNotFound       = "not_found_error"
	TypeTooLarge       = "request_too_large"
	TypeRateLimit      = "rate_limit_error"
	TypeAPI            = "api_error"
	TypeOverloaded     = "overloaded_error"
)

// ErrorType is the Anthropic error type of an HTTP status.
func ErrorType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return TypeAuthentication
	case status == http.StatusForbidden:
		return TypePermission
	case status == http.StatusNotFound:
		return TypeNotFound
	case status == http.StatusRequestEntityTooLarge:
		return TypeTooLarge
	case status == http.StatusTooManyRequests:
		return TypeRateLimit
	case status == http.StatusServiceUnavailable || status == 529:
		return TypeOverloaded
	case status >= 400 && status < 500:
		return TypeInvalidRequest
	}
	return TypeAPI
}

// AppendError appends an error body in Anthropic's shape:
//
//	{"type":"error","error":{"type":"…","message":"…"}}
//
// with the type ErrorType gives for status.
func AppendError(dst []byte, status int, message string) []byte {
	return AppendErrorType(dst, ErrorType(status), message)
}

// AppendErrorType is AppendError with the error's type given: vLLM's
// Anthropic router sends its own error types (BadRequestError, ...) in
// this envelope (api_router.py translate_error_response).
func AppendErrorType(dst []byte, typ, message string) []byte {
	dst = append(dst, `{"type":"error","error":{"type":`...)
	dst = openai.AppendString(dst, typ)
	dst = append(dst, `,"message":`...)
	dst = openai.AppendString(dst, message)
	return append(dst, "}}"...)
}

// AppendString appends s as a JSON string, escaped as vLLM's Python
// writes it (json.dumps(ensure_ascii=False), pydantic's model_dump_json):
// <, >, & and U+2028 as they are, not as encoding/json escapes them.
func AppendString(dst []byte, s string) []byte { return openai.AppendString(dst, s) }

// AppendStreamError appends the event Anthropic's API ends a stream with
// when it fails after the 200 header went out
// (https://docs.anthropic.com/en/docs/build-with-claude/streaming, "Error
// events"):
//
//	event: error\ndata: {"type":"error","error":{"type":"…","message":"…"}}\n\n
func AppendStreamError(dst []byte, typ, message string) []byte {
	dst = append(dst, "event: error\ndata: "...)
	dst = AppendErrorType(dst, typ, message)
	return append(dst, "\n\n"...)
}
