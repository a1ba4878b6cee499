package template

import (
	"os"
	"testing"
)

func TestContentFormat(t *testing.T) {
	f := func(src, want string) {
		t.Helper()
		tpl, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		if got := tpl.ContentFormat(); got != want {
			t.Errorf("ContentFormat(%q) = %s, want %s", src, got, want)
		}
	}
	f(`{% for m in messages %}{{ m.content }}{% endfor %}`, "string")
	f(`{% for m in messages %}{% for p in m['content'] %}{{ p.text }}{% endfor %}{% endfor %}`, "openai")
	f(`{% for m in messages %}{% for p in m.content %}{{ p.text }}{% endfor %}{% endfor %}`, "openai")
	f(`{% set msgs = messages[1:] %}{% for m in msgs %}{% for p in m.content | selectattr("type", "equalto", "text") %}{{ p.text }}{% endfor %}{% endfor %}`, "openai")
	f(`{% set a = messages %}{% set b = a | list %}{% for m in b %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{{ p }}{% endfor %}{% endif %}{% endfor %}`, "openai")
	f(`{% macro r(m) %}{% for p in m.content %}{{ p }}{% endfor %}{% endmacro %}{% for m in messages %}{{ r(m) }}{% endfor %}`, "openai")
	f(`{% for p in message.content %}{% endfor %}`, "string") // message is not a loop over messages
	f(`{% for m in other %}{% for p in m.content %}{% endfor %}{% endfor %}`, "string")
	f(`{% for k, v in messages %}{% endfor %}`, "string")
	f(`{% set a = b %}{% set b = a %}{% set a = messages %}{% for m in a %}{% for c in m.content %}{% endfor %}{% endfor %}`, "openai")

	cfg, err := os.ReadFile("testdata/qwen3/tokenizer_config.json")
	if err != nil {
		t.Skip(err)
	}
	chat, err := NewChat(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := chat.ContentFormat(false); got != "string" {
		t.Errorf("Qwen3: %s, want string", got)
	}
}
