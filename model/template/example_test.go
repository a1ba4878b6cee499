package template_test

import (
	"fmt"
	"time"

	"github.com/inferrail/inferrail/model/template"
)

func ExampleChat_Apply() {
	cfg := []byte(`{"eos_token": "<|im_end|>", "chat_template": "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}{{ eos_token }}\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"}`)
	chat, err := template.NewChat(cfg)
	if err != nil {
		panic(err)
	}
	messages, _ := template.ParseJSON([]byte(`[{"role": "user", "content": "Hi"}]`))
	prompt, err := chat.Apply(messages, nil, true, nil, time.Now())
	if err != nil {
		panic(err)
	}
	fmt.Print(prompt)
	// Output:
	// <|im_start|>user
	// Hi<|im_end|>
	// <|im_start|>assistant
}

func ExampleCompile() {
	tpl, err := template.Compile(`{{ args|tojson }} {{ [1.0, none, 'a'] }} {{ "a b c".split(" ", 1) }}`)
	if err != nil {
		panic(err)
	}
	args, _ := template.ParseJSON([]byte(`{"z": 1.0, "a": "東京"}`))
	ctx := template.NewDict(1)
	ctx.SetString("args", args)
	out, err := tpl.Render(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(out)
	// Output:
	// {"z": 1.0, "a": "東京"} [1.0, None, 'a'] ['a', 'b c']
}
