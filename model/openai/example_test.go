package openai_test

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/inferrail/inferrail/model/openai"
)

// A chat request through the three validation stages, then a streamed
// answer with a final usage chunk.
func Example() {
	body := []byte(`{"model":"Qwen/Qwen3-8B","messages":[{"role":"user","content":"Hi"}],` +
		`"stream":true,"stream_options":{"include_usage":true},"max_tokens":8}`)
	if err := openai.CheckContentType("application/json"); err != nil {
		panic(err)
	}
	req, err := openai.ParseChat(body)
	if err != nil {
		panic(err)
	}
	// The caller answers an unknown req.Model with openai.ModelNotFound here.
	if err := req.Check(); err != nil {
		panic(err)
	}

	rng := rand.New(rand.NewPCG(1, 2))
	id := openai.ChatID(openai.BaseRequestID("", false, req.RequestID, rng))
	final, continuous := req.StreamOptions.Usage(false)
	s := openai.NewChatStream(openai.StreamConfig{
		ID: id, Created: 1753106400, Model: req.Model,
		Fingerprint: openai.Fingerprint("0.26.0", "2844599c"), IncludeUsage: final,
	})
	var u *openai.Usage
	if continuous {
		u = &openai.Usage{PromptTokens: 9}
	}
	var out []byte
	out = s.AppendRole(out, req.ResponseRole("assistant"), u)
	out = s.AppendContent(out, "Hello", u)
	out = s.AppendFinish(out, "!", openai.Finish{Reason: "stop"}, u)
	if final {
		out = s.AppendUsage(out, &openai.Usage{PromptTokens: 9, CompletionTokens: 2})
	}
	out = openai.AppendDone(out)
	fmt.Print(string(out))
	// Output:
	// data: {"id":"chatcmpl-c4f5a58656eef510","object":"chat.completion.chunk","created":1753106400,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}
	//
	// data: {"id":"chatcmpl-c4f5a58656eef510","object":"chat.completion.chunk","created":1753106400,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null,"token_ids":null}]}
	//
	// data: {"id":"chatcmpl-c4f5a58656eef510","object":"chat.completion.chunk","created":1753106400,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":"!"},"logprobs":null,"finish_reason":"stop","stop_reason":null,"token_ids":null}]}
	//
	// data: {"id":"chatcmpl-c4f5a58656eef510","object":"chat.completion.chunk","created":1753106400,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":9,"total_tokens":11,"completion_tokens":2},"system_fingerprint":"vllm-0.26.0-2844599c"}
	//
	// data: [DONE]
}

// Rendering a rejected request as vLLM does.
func ExampleParseChat_error() {
	_, err := openai.ParseChat([]byte(`{"messages":[{"role":"user","content":"Hi"}],"stream_options":{"include_usage":true}}`))
	var e *openai.Error
	if errors.As(err, &e) {
		fmt.Println(e.Status)
		fmt.Println(string(openai.AppendError(nil, e)))
	}
	// Output:
	// 400
	// {"error":{"message":"1 validation error:\n  body: Value error, Stream options can only be defined when `stream=True`. (parameter=stream_options)","type":"Bad Request","param":"stream_options","code":400}}
}

func ExampleCompletionRequest_Check() {
	req, err := openai.ParseCompletion([]byte(`{"model":"m","prompt":"Once upon a time","n":2}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(string(openai.AppendError(nil, req.Check().(*openai.Error))))
	// Output:
	// {"error":{"message":"n > 1 is not supported by this simulator, which returns one choice per request; set n to 1 or omit it.","type":"BadRequestError","param":"n","code":400}}
}

func ExampleAppendModelList() {
	rng := rand.New(rand.NewPCG(3, 4))
	fmt.Println(string(openai.AppendModelList(nil, []openai.ModelCard{{
		ID: "Qwen/Qwen3-8B", Created: 1753106400, Root: "/models/Qwen3-8B", MaxModelLen: 32768,
		PermissionID: openai.PermissionID(rng),
	}})))
	// Output:
	// {"object":"list","data":[{"id":"Qwen/Qwen3-8B","object":"model","created":1753106400,"owned_by":"vllm","root":"/models/Qwen3-8B","parent":null,"max_model_len":32768,"permission":[{"id":"modelperm-e1ad106f7f0c35e6","object":"model_permission","created":1753106400,"allow_create_engine":false,"allow_sampling":true,"allow_logprobs":true,"allow_search_indices":false,"allow_view":true,"allow_fine_tuning":false,"organization":"*","group":null,"is_blocking":false}]}]}
}
