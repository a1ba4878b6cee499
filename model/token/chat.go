package token

import "strings"

// Message is one chat message as the simulator's template sees it: a role and
// its text content (content parts already joined).
type Message struct {
	Role    string
	Content string
}

// RenderSimChat renders messages with the simulator's fixed ChatML-style
// template:
//
//	<|im_start|>{role}\n{content}<|im_end|>\n   (per message)
//	<|im_start|>assistant\n                     (when addGenerationPrompt)
//
// Every message starts after a newline, so its tokens do not depend on the
// message before it, and an assistant answer resent in a later turn tokenizes
// as it was generated.
func RenderSimChat(msgs []Message, addGenerationPrompt bool) string {
	n := 0
	for _, m := range msgs {
		n += len(m.Role) + len(m.Content) + 26
	}
	var b strings.Builder
	b.Grow(n + 24)
	for _, m := range msgs {
		b.WriteString("<|im_start|>")
		b.WriteString(m.Role)
		b.WriteByte('\n')
		b.WriteString(m.Content)
		b.WriteString("<|im_end|>\n")
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String()
}
