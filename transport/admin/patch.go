package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/openai"
)

// maxPatchBytes bounds a PATCH /admin/config body: the size of the largest
// config file.
const maxPatchBytes = config.MaxBytes

// patch answers PATCH /admin/config, a JSON merge patch (RFC 7396) of the
// config in effect: 200 with the outcome when it was applied or changed
// nothing, 422 in the shape of POST /admin/reload when the patched config
// is invalid or needs a restart. A body that is not a JSON object gets a
// 400, a larger one than maxPatchBytes a 413, another content type than
// application/merge-patch+json or application/json a 415; these are not
// reload attempts and are not counted.
func (s *Server) patch(ctx *fasthttp.RequestCtx) {
	mt, _, err := mime.ParseMediaType(string(ctx.Request.Header.ContentType()))
	if err != nil || (mt != "application/merge-patch+json" && mt != "application/json") {
		ctx.Response.Header.Set("Accept-Patch", "application/merge-patch+json, application/json")
		writeErr(ctx, fasthttp.StatusUnsupportedMediaType, openai.TypeBadRequestError,
			"PATCH /admin/config takes a JSON merge patch: Content-Type: application/merge-patch+json or application/json")
		return
	}
	body := ctx.PostBody()
	if len(body) > maxPatchBytes {
		writeErr(ctx, fasthttp.StatusRequestEntityTooLarge, openai.TypeBadRequestError,
			fmt.Sprintf("the patch is larger than %d bytes", maxPatchBytes))
		return
	}
	p, err := decodePatch(body)
	if err != nil {
		writeErr(ctx, fasthttp.StatusBadRequest, openai.TypeBadRequestError, err.Error())
		return
	}
	r := s.configs.Patch(p)
	writeJSON(ctx, r)
	if r.Result == "rejected" {
		ctx.SetStatusCode(fasthttp.StatusUnprocessableEntity)
	}
}

// decodePatch reads a merge patch of the config: one JSON object. Numbers
// keep their text (json.Number), so a large integer is not rounded.
func decodePatch(body []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("the patch is not JSON: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("the patch holds more than one JSON value")
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the patch must be a JSON object of config sections, got %s", kind(v))
	}
	return m, nil
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
