package openai

// Opt is an optional request value: Set reports whether the body carried a
// non-null value for it. A plain value.
type Opt[T any] struct {
	Value T
	Set   bool
}

// StreamOptions is the request's stream_options object.
type StreamOptions struct {
	Set                  bool // stream_options was a non-null object
	IncludeUsage         bool // include_usage (default false since vLLM PR #36379)
	ContinuousUsageStats bool // continuous_usage_stats (default false)
}

// Usage reports what vLLM's should_include_usage decides for a stream:
// whether a final usage chunk is sent, and whether every chunk carries
// usage too. force is the server flag --enable-force-include-usage.
func (o StreamOptions) Usage(force bool) (final, continuous bool) {
	if !o.Set {
		return force, false
	}
	final = o.IncludeUsage || force
	return final, final && o.ContinuousUsageStats
}

// Message is one chat message.
type Message struct {
	Role string
	// Content is the message text: the string content, or the text parts
	// joined with "\n" as vLLM's chat_utils does for string-format chat
	// templates.
	Content string
	// NoContent is set when content was null or absent. vLLM leaves such a
	// message out of the rendered conversation (_parse_chat_message_content
	// returns no message for it).
	NoContent bool
	// NonText is set when content was a list holding parts other than
	// {"type":"text"} (images, audio, files, …). Their payload is not kept.
	NonText bool
}

// ChatRequest is a parsed POST /v1/chat/completions body. Only the fields
// the simulator and the gateway use are kept; the others are type-checked
// and dropped, and unknown fields are ignored, as vLLM does. It shares no
// memory with the body it was parsed from, so it may outlive a fasthttp
// request; it is owned by the caller and not safe for concurrent mutation.
type ChatRequest struct {
	Model    string // "" when absent or null: the server's default model
	Messages []Message

	MaxTokens           Opt[int64] // max_tokens (deprecated by OpenAI, still honoured)
	MaxCompletionTokens Opt[int64] // max_completion_tokens, wins over max_tokens

	Stream        bool
	StreamOptions StreamOptions

	N           int64      // n, default 1
	BestOf      Opt[int64] // best_of (not a field of newer vLLM chat requests; kept to refuse > 1)
	Logprobs    bool       // logprobs
	TopLogprobs int64      // top_logprobs, default 0
	Echo        bool       // echo

	AddGenerationPrompt  bool // add_generation_prompt, default true
	ContinueFinalMessage bool // continue_final_message

	CacheSalt string // cache_salt; "" when absent
	IgnoreEOS bool   // ignore_eos
	User      string // user
	RequestID Opt[string]

	Temperature Opt[float64]
	TopP        Opt[float64]
	TopK        Opt[int64]
	Seed        Opt[int64]
	Stop        []string // stop: a string becomes a one-element list
	MinTokens   int64
	Priority    int64
}

// MaxOutputTokens is the request's output cap as vLLM reads it:
// max_completion_tokens if set, else max_tokens. ok is false when neither
// was given, in which case vLLM uses max_model_len minus the prompt length.
func (r *ChatRequest) MaxOutputTokens() (n int64, ok bool) {
	if r.MaxCompletionTokens.Set {
		return r.MaxCompletionTokens.Value, true
	}
	return r.MaxTokens.Value, r.MaxTokens.Set
}

// ResponseRole is the role vLLM puts on the answer (get_chat_request_role):
// the server's --response-role (normally "assistant") when
// add_generation_prompt is on, else the role of the last message.
func (r *ChatRequest) ResponseRole(serverRole string) string {
	if r.AddGenerationPrompt || len(r.Messages) == 0 {
		return serverRole
	}
	return r.Messages[len(r.Messages)-1].Role
}

// PromptKind says which form a completion prompt took.
type PromptKind uint8

const (
	PromptText   PromptKind = iota + 1 // "text" or ["text", …]
	PromptTokens                       // [1, 2, 3] or [[1, 2, 3], …]
)

// Prompt is a completion request's prompt. Count is the number of prompts in
// the request: 1 for a string, a token list, or a one-element list of either;
// the batch size for longer lists of strings or token lists (0 for []).
// Text or Tokens holds the first prompt.
type Prompt struct {
	Kind   PromptKind
	Count  int
	Text   string
	Tokens []uint32
}

// CompletionRequest is a parsed POST /v1/completions body, owned by the
// caller like ChatRequest.
type CompletionRequest struct {
	Model  string
	Prompt Prompt

	MaxTokens int64 // max_tokens; absent or null means 16

	Stream        bool
	StreamOptions StreamOptions

	N        int64      // n, default 1
	BestOf   Opt[int64] // best_of (dropped from newer vLLM; kept to refuse > 1)
	Logprobs Opt[int64] // logprobs
	Echo     bool       // echo

	PromptEmbeds bool // prompt_embeds was given (not supported)
	// AddSpecialTokens is add_special_tokens: whether the tokenizer adds
	// its special tokens (BOS, ...) around the prompt; vLLM's default is true.
	AddSpecialTokens Opt[bool]

	CacheSalt string
	IgnoreEOS bool
	User      string
	Suffix    string
	RequestID Opt[string]

	Temperature Opt[float64]
	TopP        Opt[float64]
	TopK        Opt[int64]
	Seed        Opt[int64]
	Stop        []string
	MinTokens   int64
	Priority    int64
}
