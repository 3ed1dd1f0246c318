package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Widths of the compact renderings.
const (
	maxArgsShown  = 120
	maxErrorShown = 120
	maxTextShown  = 400
)

// turnView prints one followed turn.
type turnView struct {
	ch        *chat
	step      int64
	shown     map[int64]string // the text printed per step
	done      map[int64]bool   // steps whose whole text is printed
	midLine   bool
	reasoning bool
}

func newTurnView(ch *chat) *turnView {
	return &turnView{ch: ch, step: -1, shown: map[int64]string{}, done: map[int64]bool{}}
}

func (v *turnView) newline() {
	if v.midLine {
		fmt.Fprintln(v.ch.w)
		v.midLine = false
	}
}

// show prints one progress observation.
func (v *turnView) show(ctx context.Context, p client.TurnProgress) {
	w := v.ch.w
	switch p.Kind {
	case client.ProgressReasoning:
		if !v.reasoning {
			v.reasoning = true
			fmt.Fprint(w, "(thinking) ")
			v.midLine = true
		}
	case client.ProgressText:
		if v.done[p.Step] {
			return
		}
		if p.Step != v.step {
			v.newline()
			v.step = p.Step
		}
		if p.Restart {
			// The model call started over: what was printed of this
			// step is discarded, and its text follows anew.
			v.newline()
			fmt.Fprintln(w, retriedNote)
			v.shown[p.Step] = ""
		}
		if p.Gap {
			fmt.Fprint(w, "…")
			v.shown[p.Step] = ""
		}
		fmt.Fprint(w, termText(p.Text, true))
		v.shown[p.Step] += p.Text
		v.midLine = true
	case client.ProgressToolFinished:
		evs := v.ch.turnEvents(ctx)
		v.finishSteps(evs, p.Turn, p.Step)
		v.newline()
		fmt.Fprintln(w, v.ch.toolLine(evs, p.Call))
	case client.ProgressEnded:
		v.finishSteps(sessionEvents(p.Events), p.Turn, p.Info.Steps)
		v.newline()
		if p.Info.EndSeq > v.ch.cursor {
			v.ch.cursor = p.Info.EndSeq
		}
		fmt.Fprintf(w, "[turn %d %s]\n", p.Info.Turn, chatReason(p.Info))
	}
}

// chatReason renders a turn's end: "completed", "aborted by user",
// "error: message (code)", ...
func chatReason(s *wire.TurnInfo) string {
	if r := s.Reason; r != nil && r.Kind == wire.TurnEndAborted && len(r.Reason) > 0 {
		var cause struct {
			Kind string `json:"kind"`
		}
		if json.Unmarshal(r.Reason, &cause) == nil && cause.Kind != "" {
			return "aborted by " + termText(cause.Kind, false)
		}
	}
	return describeReason(s)
}

// finishSteps prints, from the stored assistant messages of turn's steps
// up to last, the text that streamed between two polls (all of a step's
// text when none of it was seen).
func (v *turnView) finishSteps(evs []session.Event, turn, last int64) {
	for _, e := range evs {
		if e.Type != wire.TypeAssistantMessage {
			continue
		}
		m, err := e.AssistantMessage()
		if err != nil || m.Turn != turn || m.Step > last || v.done[m.Step] {
			continue
		}
		v.done[m.Step] = true
		var text string
		for _, b := range m.Message.Content {
			if b.Type == wire.BlockText {
				text += b.Text
			}
		}
		shown, rest := v.shown[m.Step], text
		if shown != "" {
			if i := strings.LastIndex(text, shown); i >= 0 {
				rest = text[i+len(shown):]
			} else {
				rest = ""
			}
		}
		if rest == "" {
			continue
		}
		if v.step != m.Step {
			v.newline()
			v.step = m.Step
		}
		fmt.Fprint(v.ch.w, termText(rest, true))
		v.midLine = true
	}
}

// turnEvents reads the events from the running turn's cursor, nil without
// the store or when they cannot be read.
func (ch *chat) turnEvents(ctx context.Context) []session.Event {
	if ch.reader == nil {
		return nil
	}
	evs, err := ch.reader.ReadEvents(ctx, ch.id, ch.cursor, -1)
	if err != nil {
		return nil
	}
	return sessionEvents(evs)
}

// sessionEvents decodes stored events read as plain envelopes with the
// session rules; nil when one cannot be decoded.
func sessionEvents(evs []wire.Event) []session.Event {
	out, err := session.FromWireEvents(evs)
	if err != nil {
		return nil
	}
	return out
}

// toolLine renders a finished tool call on one line: its name, its
// arguments and how it ended (arguments and result size need the store's
// events).
func (ch *chat) toolLine(evs []session.Event, call *wire.CallState) string {
	var call0 *wire.ToolCall
	var result *wire.ToolResult
	for _, e := range evs {
		switch e.Type {
		case wire.TypeToolCall:
			if c, err := e.ToolCall(); err == nil && c.CallID == call.ID {
				call0 = &c
			}
		case wire.TypeToolResult:
			if r, err := e.ToolResult(); err == nil && r.Message.Source.CallID == call.ID {
				result = &r
			}
		}
	}
	head := "⚙ " + displayText(call.Name)
	if call0 != nil {
		head += " " + termText(clip(argsLine(call0.Arguments), maxArgsShown), false)
	} else {
		head += " (" + displayText(call.ID) + ")"
	}
	switch {
	case call.State == wire.CallSkipped:
		return head + " → skipped (aborted before dispatch)"
	case call.State == wire.CallFailed:
		return head + " → failed (its activity failed)"
	case result != nil:
		return head + " → " + resultSummary(result.Message.Content, result.Error)
	case call.IsError:
		return head + " → error: " + termText(call.Code, false)
	}
	return head + " → ok"
}

// resultSummary is "ok (N bytes)" or "error: <first line>".
func resultSummary(content []wire.ToolResultContent, toolErr *wire.ToolError) string {
	var text strings.Builder
	isError := toolErr != nil
	for _, c := range content {
		isError = isError || c.IsError
		for _, t := range c.Content {
			text.WriteString(t.Text)
		}
	}
	if !isError {
		return fmt.Sprintf("ok (%d bytes)", text.Len())
	}
	msg := strings.TrimPrefix(firstLine(text.String()), "Error: ")
	if msg == "" && toolErr != nil {
		msg = toolErr.Code
	}
	return "error: " + termText(clip(msg, maxErrorShown), false)
}

// history prints the conversation so far, compactly.
func (ch *chat) history(ctx context.Context) error {
	if ch.reader == nil {
		fmt.Fprintf(ch.w, "/history reads the store: start the chat with --root DIR or $%s\n", envRoot)
		return nil
	}
	stored, err := ch.reader.ReadEvents(ctx, ch.id, 0, -1)
	if err != nil {
		return err
	}
	evs, err := session.FromWireEvents(stored)
	if err != nil {
		return err
	}
	msgs, err := agent.Conversation(evs)
	if err != nil {
		return err
	}
	results := map[string]provider.Block{}
	for _, m := range msgs {
		for _, b := range m.Content {
			if b.Type == "tool-result" {
				results[b.ToolCallID] = b
			}
		}
	}
	if len(msgs) == 0 {
		fmt.Fprintln(ch.w, "(no messages yet)")
	}
	for _, m := range msgs {
		for _, b := range m.Content {
			switch {
			case b.Type == "text" && m.Role == "user":
				fmt.Fprintf(ch.w, "you: %s\n", termText(clip(oneLine(b.Text), maxTextShown), false))
			case b.Type == "text":
				fmt.Fprintf(ch.w, "assistant: %s\n", termText(clip(oneLine(b.Text), maxTextShown), false))
			case b.Type == "tool-call":
				line := "⚙ " + displayText(b.Name) + " " + termText(clip(argsLine(b.Arguments), maxArgsShown), false)
				if r, ok := results[b.ID]; ok {
					line += " → " + blockSummary(r)
				}
				fmt.Fprintln(ch.w, line)
			}
		}
	}
	return nil
}

// blockSummary is resultSummary for a provider tool-result block.
func blockSummary(b provider.Block) string {
	var text strings.Builder
	for _, c := range b.Content {
		text.WriteString(c.Text)
	}
	if !b.IsError {
		return fmt.Sprintf("ok (%d bytes)", text.Len())
	}
	return "error: " + termText(clip(strings.TrimPrefix(firstLine(text.String()), "Error: "), maxErrorShown), false)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// argsLine renders tool-call arguments on one line: compact JSON (with
// <, > and & as themselves, not the \u003c escapes Go's encoder writes),
// or the model's text with its whitespace folded when it is not JSON.
func argsLine(args string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(args)) == nil {
		return unescapeHTML(b.String())
	}
	return oneLine(args)
}

// htmlEscapes are the escapes encoding/json writes for <, > and &.
var htmlEscapes = map[string]byte{`\u003c`: '<', `\u003e`: '>', `\u0026`: '&'}

// unescapeHTML writes the HTML escapes of valid JSON (\u003c, \u003e,
// \u0026) as the characters they stand for; other escapes, and an escaped
// backslash before "u003c", stay.
func unescapeHTML(s string) string {
	if !strings.Contains(s, `\u00`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		if i+6 <= len(s) {
			if c, ok := htmlEscapes[s[i:i+6]]; ok {
				b.WriteByte(c)
				i += 5
				continue
			}
		}
		b.WriteString(s[i : i+2])
		i++
	}
	return b.String()
}

// oneLine folds whitespace runs with newlines into single spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// clip shortens s to n runes, marking the cut with "…".
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
