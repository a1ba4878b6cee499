package openai

import "strconv"

// ModelCard is one entry of GET /v1/models (vLLM's ModelCard with one
// ModelPermission; engine/protocol.py @ 040a2cc2a629, vllm.md §5.6). A
// plain value; AppendModelCard only reads it.
type ModelCard struct {
	ID      string // served model name
	Created int64  // Unix seconds; vLLM stamps the time of the call
	Root    string // model path (LoRA: adapter path); "" is null
	Parent  string // "" is null; LoRA cards name the base model
	// MaxModelLen is the context length; 0 is null, as on LoRA cards.
	MaxModelLen int
	// PermissionID is the permission object's id, "modelperm-" + 16 hex
	// (PermissionID); vLLM makes a fresh one per call.
	PermissionID string
}

// AppendModelList appends the GET /v1/models body:
// {"object":"list","data":[card,…]}.
func AppendModelList(dst []byte, cards []ModelCard) []byte {
	dst = append(dst, `{"object":"list","data":[`...)
	for i := range cards {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendModelCard(dst, &cards[i])
	}
	return append(dst, "]}"...)
}

// AppendModelCard appends one model card with its permission list; the
// permission is created at the card's time, as vLLM's default factories run
// within the same call.
func AppendModelCard(dst []byte, c *ModelCard) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, c.ID)
	dst = append(dst, `,"object":"model","created":`...)
	dst = strconv.AppendInt(dst, c.Created, 10)
	dst = append(dst, `,"owned_by":"vllm","root":`...)
	dst = appendNullString(dst, c.Root)
	dst = append(dst, `,"parent":`...)
	dst = appendNullString(dst, c.Parent)
	dst = append(dst, `,"max_model_len":`...)
	if c.MaxModelLen == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, int64(c.MaxModelLen), 10)
	}
	dst = append(dst, `,"permission":[{"id":`...)
	dst = appendString(dst, c.PermissionID)
	dst = append(dst, `,"object":"model_permission","created":`...)
	dst = strconv.AppendInt(dst, c.Created, 10)
	return append(dst, `,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]}`...)
}

// AppendVersion appends the GET /version body, {"version":"0.26.0"}.
func AppendVersion(dst []byte, version string) []byte {
	dst = append(dst, `{"version":`...)
	dst = appendString(dst, version)
	return append(dst, '}')
}
