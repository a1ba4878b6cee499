package openai

import (
	"strconv"
	"strings"
)

// Error is an OpenAI-shaped API error, as vLLM's ErrorResponse carries it:
// {"error":{"message","type","param","code"}} with code the HTTP status.
// Every error this package returns is an *Error with a 4xx Status. An Error
// is immutable once returned.
type Error struct {
	Status  int    // HTTP status, also sent as error.code
	Type    string // error.type: "Bad Request", "BadRequestError", "NotFoundError", ...
	Message string // error.message
	Param   string // error.param; "" is sent as null
	// Code is error.code when set, in place of the status: OpenAI's own
	// string codes, such as invalid_api_key and model_not_found.
	Code string
}

func (e *Error) Error() string {
	if e.Param == "" {
		return "openai: " + strconv.Itoa(e.Status) + " " + e.Type + ": " + e.Message
	}
	return "openai: " + strconv.Itoa(e.Status) + " " + e.Type + " (" + e.Param + "): " + e.Message
}

// Error types vLLM uses. TypeBadRequest is HTTPStatus.BAD_REQUEST.phrase,
// which FastAPI-level failures (request validation, HTTPException) carry;
// the others come from create_error_response
// (vllm/frontend/entrypoints/serve/exception_handling/error_response.py @ 055e47c28003).
const (
	TypeBadRequest      = "Bad Request"
	TypeBadRequestError = "BadRequestError"
	TypeNotFoundError   = "NotFoundError"
)

// AppendError appends the body vLLM sends for e:
// JSONResponse(ErrorResponse.model_dump()), compact and not ASCII-escaped.
//
//	{"error":{"message":"…","type":"…","param":null,"code":400}}
func AppendError(dst []byte, e *Error) []byte {
	dst = append(dst, `{"error":{"message":`...)
	dst = appendString(dst, e.Message)
	dst = append(dst, `,"type":`...)
	dst = appendString(dst, e.Type)
	dst = append(dst, `,"param":`...)
	dst = appendNullString(dst, e.Param)
	dst = append(dst, `,"code":`...)
	if e.Code != "" {
		dst = appendString(dst, e.Code)
	} else {
		dst = strconv.AppendInt(dst, int64(e.Status), 10)
	}
	return append(dst, "}}"...)
}

// AppendStreamError appends the SSE event vLLM sends when a request fails
// after the 200 header of a stream went out; the caller appends AppendDone
// next, as vLLM does. vLLM builds it with
// json.dumps(ErrorResponse.model_dump()) (create_streaming_error_response),
// so unlike every other body it has ", " / ": " separators and escapes all
// non-ASCII as \uXXXX:
//
//	data: {"error": {"message": "…", "type": "…", "param": null, "code": 400}}\n\n
func AppendStreamError(dst []byte, e *Error) []byte {
	dst = append(dst, `data: {"error": {"message": `...)
	dst = appendStringASCII(dst, e.Message)
	dst = append(dst, `, "type": `...)
	dst = appendStringASCII(dst, e.Type)
	dst = append(dst, `, "param": `...)
	if e.Param == "" {
		dst = append(dst, "null"...)
	} else {
		dst = appendStringASCII(dst, e.Param)
	}
	dst = append(dst, `, "code": `...)
	if e.Code != "" {
		dst = appendStringASCII(dst, e.Code)
	} else {
		dst = strconv.AppendInt(dst, int64(e.Status), 10)
	}
	return append(dst, "}}\n\n"...)
}

// ModelNotFound is vLLM's answer to a request for a model it does not serve
// (OpenAIServing._check_model): 404 NotFoundError, param "model".
func ModelNotFound(model string) *Error {
	return &Error{Status: 404, Type: TypeNotFoundError, Param: "model",
		Message: "The model `" + model + "` does not exist."}
}

// CheckContentType reproduces vLLM's validate_json_request dependency on
// the chat and completion routes: the media type (before any ';') must be
// application/json, compared case-insensitively; a missing header fails too.
// FastAPI raises it as a RequestValidationError, so it is a 400 "Bad
// Request". Call it before ParseChat / ParseCompletion. A non-nil error is
// an *Error.
func CheckContentType(contentType string) error {
	mt, _, _ := strings.Cut(contentType, ";")
	if strings.EqualFold(mt, "application/json") {
		return nil
	}
	return validationError("header.content-type", "Unsupported Media Type: Only 'application/json' is allowed")
}

// bodyParseError is FastAPI's HTTPException for a body that is not text
// (invalid UTF-8) or that Python's json module fails on without a
// JSONDecodeError (nesting too deep): http_exception_handler renders it with
// type = HTTP phrase and no param.
func bodyParseError() *Error {
	return &Error{Status: 400, Type: TypeBadRequest, Message: "There was an error parsing the body"}
}

// fieldError is one pydantic-style validation failure: where (dotted loc,
// as vLLM's clean_loc_for_param joins it) and what.
type fieldError struct {
	loc string
	msg string
}

// validationError builds the 400 that vLLM's validation_exception_handler
// renders for a single RequestValidationError entry.
func validationError(loc, msg string) *Error {
	return validationErrors([]fieldError{{loc, msg}}, "")
}

// validationErrors renders pydantic errors the way vLLM's newest handler
// does: "N validation error(s):" and one indented line per error, type
// "Bad Request", param the VLLMValidationError's parameter when there is one
// (paramOverride), else the first error's location. vLLM prints each error
// as a Python dict repr (type, loc, msg, input, ctx); this package prints
// "loc: msg" instead, so these messages are not byte-identical to vLLM's:
// status, type, param and the text of vLLM's own validator messages are.
func validationErrors(errs []fieldError, paramOverride string) *Error {
	var b strings.Builder
	b.WriteString(strconv.Itoa(len(errs)))
	if len(errs) == 1 {
		b.WriteString(" validation error:")
	} else {
		b.WriteString(" validation errors:")
	}
	for _, e := range errs {
		b.WriteString("\n  ")
		b.WriteString(e.loc)
		b.WriteString(": ")
		b.WriteString(e.msg)
	}
	param := paramOverride
	if param == "" && len(errs) > 0 {
		param = errs[0].loc
	}
	return &Error{Status: 400, Type: TypeBadRequest, Message: b.String(), Param: param}
}

// valueError is a VLLMValidationError raised in one of the request model's
// mode="before" validators. Pydantic wraps it as a "value_error" at loc
// ("body",) with msg "Value error, " + str(exc), where str(exc) appends
// " (parameter=…, value=…)"; vLLM's handler takes param from the exception.
func valueError(msg, param, value string) *Error {
	full := msg
	switch {
	case param != "" && value != "":
		full += " (parameter=" + param + ", value=" + value + ")"
	case param != "":
		full += " (parameter=" + param + ")"
	}
	// With no parameter, vLLM's handler falls back to the loc: "body".
	return validationErrors([]fieldError{{"body", "Value error, " + full}}, param)
}

// engineError is a ValueError / VLLMValidationError raised after the model
// check (SamplingParams and friends): create_error_response renders it as
// 400 BadRequestError with message str(exc), which for a
// VLLMValidationError ends in " (parameter=…, value=…)".
func engineError(msg, param, value string) *Error {
	full := msg
	switch {
	case param != "" && value != "":
		full += " (parameter=" + param + ", value=" + value + ")"
	case param != "":
		full += " (parameter=" + param + ")"
	}
	return &Error{Status: 400, Type: TypeBadRequestError, Message: full, Param: param}
}

// unsupported is this simulator's own refusal of a feature vLLM has.
func unsupported(param, msg string) *Error {
	return &Error{Status: 400, Type: TypeBadRequestError, Param: param, Message: msg}
}
