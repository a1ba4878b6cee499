package anthropic

import "strings"

// InlineMode is how inline role "system" messages are placed, vLLM's
// --anthropic-inline-system modes (inline_system.py). Clients such as
// Claude Code append one to messages on almost every turn; both modes
// change only the end of the conversation, so that each request renders
// as an extension of the previous one and its prefix stays cached.
type InlineMode uint8

const (
	// Preserve keeps them in place as system turns. It folds anyway when
	// the request has no system prompt at all.
	Preserve InlineMode = iota
	// Fold merges their text into a neighbouring user message.
	Fold
)

// joinTexts joins the non-empty texts with blank lines (_join).
func joinTexts(texts ...string) string {
	var b strings.Builder
	for _, t := range texts {
		if t == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(t)
	}
	return b.String()
}

// placeInline does normalize_inline_system: it returns the text of the
// system messages that lead messages (to follow the system prompt) and the
// remaining messages, with inline system messages kept or folded. The
// request's messages are not changed.
func placeInline(r *Request, mode InlineMode) (string, []Message) {
	msgs := r.Messages
	has := false
	for i := range msgs {
		if msgs[i].Role == "system" {
			has = true
			break
		}
	}
	if !has {
		return "", msgs
	}
	lead := 0
	for lead < len(msgs) && msgs[lead].Role == "system" {
		lead++
	}
	texts := make([]string, lead)
	for i := range lead {
		texts[i] = r.messageSystemText(&msgs[i])
	}
	leading := joinTexts(texts...)
	rest := outOfToolRuns(msgs[lead:])
	if mode == Preserve && (r.systemText() != "" || leading != "") {
		return leading, rest
	}
	var out []Message
	var pending []string // system text after an assistant turn
	for _, m := range rest {
		if m.Role == "system" {
			text := r.messageSystemText(&m)
			if text == "" {
				continue
			}
			if len(out) > 0 && out[len(out)-1].Role == "user" && len(pending) == 0 {
				out[len(out)-1] = appendToUser(out[len(out)-1], text)
			} else {
				pending = append(pending, text)
			}
			continue
		}
		if len(pending) > 0 {
			text := joinTexts(pending...)
			pending = pending[:0]
			if m.Role == "user" {
				m = Message{Role: m.Role, Content: addText(m.Content, text, false)}
			} else {
				out = append(out, Message{Role: "user", Content: Content{IsText: true, Text: text}})
			}
		}
		out = append(out, m)
	}
	if len(pending) > 0 {
		out = append(out, Message{Role: "user", Content: Content{IsText: true, Text: joinTexts(pending...)}})
	}
	return leading, out
}

// outOfToolRuns moves system messages that come between an assistant's
// tool_use and the user message answering it to after that message
// (_move_out_of_tool_runs).
func outOfToolRuns(msgs []Message) []Message {
	out := make([]Message, 0, len(msgs))
	var held []Message
	awaiting := false
	for _, m := range msgs {
		if m.Role == "system" {
			if awaiting {
				held = append(held, m)
			} else {
				out = append(out, m)
			}
			continue
		}
		if m.Role == "assistant" {
			out = append(out, held...)
			held = held[:0]
		}
		out = append(out, m)
		if m.Role == "user" {
			out = append(out, held...)
			held = held[:0]
		}
		awaiting = false
		if m.Role == "assistant" && !m.Content.IsText {
			for _, b := range m.Content.Blocks {
				if b.Type == "tool_use" {
					awaiting = true
					break
				}
			}
		}
	}
	return append(out, held...)
}

// addText joins text onto the text at one end of c, into the adjacent text
// block if there is one, else as a new block (_add_text).
func addText(c Content, text string, atEnd bool) Content {
	if c.IsText {
		if atEnd {
			return Content{IsText: true, Text: joinTexts(c.Text, text)}
		}
		return Content{IsText: true, Text: joinTexts(text, c.Text)}
	}
	blocks := append([]Block(nil), c.Blocks...)
	end := 0
	if atEnd {
		end = len(blocks) - 1
	}
	if len(blocks) > 0 && blocks[end].Type == "text" {
		old := ""
		if blocks[end].Text != nil {
			old = *blocks[end].Text
		}
		s := joinTexts(text, old)
		if atEnd {
			s = joinTexts(old, text)
		}
		blocks[end].Text = &s
		return Content{Blocks: blocks}
	}
	nb := Block{Type: "text", Text: &text}
	if atEnd {
		return Content{Blocks: append(blocks, nb)}
	}
	return Content{Blocks: append([]Block{nb}, blocks...)}
}

// addToolText is addText for a tool_result's content, at its end.
func addToolText(c *ToolContent, text string) *ToolContent {
	if c == nil || c.IsText {
		old := ""
		if c != nil {
			old = c.Text
		}
		return &ToolContent{IsText: true, Text: joinTexts(old, text)}
	}
	items := append([]Item(nil), c.Items...)
	if n := len(items); n > 0 && !items[n-1].NotObject && items[n-1].Type == "text" {
		old := ""
		if items[n-1].Text != nil {
			old = *items[n-1].Text
		}
		s := joinTexts(old, text)
		items[n-1].Text = &s
		return &ToolContent{Items: items}
	}
	return &ToolContent{Items: append(items, Item{Type: "text", Text: &text})}
}

// appendToUser appends text to a user message's own text or, when it holds
// only tool results, to the last tool result (_append_to_user), so that no
// turn is added.
func appendToUser(m Message, text string) Message {
	if !m.Content.IsText && len(m.Content.Blocks) > 0 {
		allResults := true
		for _, b := range m.Content.Blocks {
			if b.Type != "tool_result" {
				allResults = false
				break
			}
		}
		if allResults {
			blocks := append([]Block(nil), m.Content.Blocks...)
			last := &blocks[len(blocks)-1]
			last.Result = addToolText(last.Result, text)
			return Message{Role: m.Role, Content: Content{Blocks: blocks}}
		}
	}
	if m.Content.IsText {
		return Message{Role: m.Role, Content: addText(m.Content, text, true)}
	}
	var results, own []Block
	for _, b := range m.Content.Blocks {
		if b.Type == "tool_result" {
			results = append(results, b)
		} else {
			own = append(own, b)
		}
	}
	c := addText(Content{Blocks: own}, text, true)
	return Message{Role: m.Role, Content: Content{Blocks: append(results, c.Blocks...)}}
}
