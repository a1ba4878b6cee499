package auth

import (
	"github.com/inferrail/inferrail/model/openai"
)

// Challenge is the WWW-Authenticate value of a 401 (RFC 6750 §3).
const Challenge = `Bearer realm="inferrail"`

// OpenAI's answers for a missing or wrong key: 401, type
// invalid_request_error, code invalid_api_key. OpenAI echoes a masked key
// in the second; the gateway echoes nothing.
var (
	errMissingKey = &openai.Error{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or in an x-api-key header."}
	errInvalidKey = &openai.Error{Status: 401, Type: "invalid_request_error", Code: "invalid_api_key",
		Message: "Incorrect API key provided."}
	// errAdmin is the admin port's 401, in the admin port's own shape.
	errAdmin = &openai.Error{Status: 401, Type: "Unauthorized",
		Message: "The admin port needs Authorization: Bearer with the auth.admin token, or a client certificate tls.admin_listen.client_ca_file trusts."}
)

// ModelDenied is OpenAI's answer to a key asking for a model it may not use
// (or one that does not exist, which a restricted key is told alike): 404,
// code model_not_found.
func ModelDenied(model string) *openai.Error {
	return &openai.Error{Status: 404, Type: "invalid_request_error", Code: "model_not_found",
		Message: "The model `" + model + "` does not exist or you do not have access to it."}
}
