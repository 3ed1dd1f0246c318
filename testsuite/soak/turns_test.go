package soak

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// turnLog builds the events of one soak turn (turn 1, from seq 0): the
// prompt, a step with the write, the read and the missing tool, and a step
// that answers. Each event is built by kind so a test can alter it.
type turnLog struct {
	t      *testing.T
	events []session.Event
}

func (l *turnLog) add(typ string, data any, sources ...int64) int64 {
	seq := int64(len(l.events))
	e, err := session.NewEvent(typ, seq, 1767225600000+seq, data)
	require.NoError(l.t, err)
	e.SourceEventSeqs = sources
	l.events = append(l.events, e)
	return seq
}

func (l *turnLog) message(step int64, calls ...[2]string) {
	content := []any{map[string]any{"type": "text", "text": "x"}}
	for _, c := range calls {
		content = append(content, map[string]any{"type": "tool-call", "id": c[0], "name": c[1], "arguments": map[string]any{}})
	}
	l.add(wire.TypeAssistantMessage, map[string]any{"turn": 1, "step": step, "stream": []any{},
		"message": map[string]any{"id": "a", "role": "assistant", "content": content}})
}

func (l *turnLog) call(id, name string) int64 {
	return l.add(wire.TypeToolCall, map[string]any{"turn": 1, "step": 1, "callId": id, "name": name, "arguments": "{}"})
}

func (l *turnLog) result(id string, callSeq int64, text, code string) {
	data := map[string]any{"turn": 1, "step": 1, "message": map[string]any{
		"id": "r-" + id, "role": "user", "source": map[string]any{"kind": "tool", "callId": id},
		"content": []any{map[string]any{"type": "tool-result", "toolCallId": id, "isError": code != "",
			"content": []any{map[string]any{"type": "text", "text": text}}}},
	}}
	if code != "" {
		data["error"] = map[string]any{"name": "ToolError", "code": code}
	}
	l.add(wire.TypeToolResult, data, callSeq)
}

func (l *turnLog) unknown(id string, callSeq int64) {
	e, err := session.OutcomeUnknownResult(1, 1, id, callSeq, int64(len(l.events)), 1767225600000)
	require.NoError(l.t, err)
	l.events = append(l.events, e)
}

// goodTurn returns a soak turn as the loop stores it, with the missing
// tool's result built by missing.
func goodTurn(t *testing.T, missing func(l *turnLog, callSeq int64)) *turnLog {
	l := &turnLog{t: t}
	l.add(wire.TypeTurnStart, map[string]any{"turn": 1})
	l.add(wire.TypeStepStart, map[string]any{"turn": 1, "step": 1})
	l.add(wire.TypeUserMessage, map[string]any{"id": "m1", "role": "user", "content": []any{map[string]any{"type": "text", "text": "go"}}, "source": map[string]any{"kind": "user"}})
	l.message(1, [2]string{"w", "write_file"}, [2]string{"r", "read_file"}, [2]string{"x", "erase_disk"})
	w := l.call("w", "write_file")
	l.result("w", w, "wrote 10 bytes", "")
	r := l.call("r", "read_file")
	l.result("r", r, TurnNotes, "")
	x := l.call("x", "erase_disk")
	missing(l, x)
	l.add(wire.TypeStepEnd, map[string]any{"turn": 1, "step": 1})
	l.add(wire.TypeStepStart, map[string]any{"turn": 1, "step": 2})
	l.message(2)
	l.add(wire.TypeStepEnd, map[string]any{"turn": 1, "step": 2})
	l.add(wire.TypeTurnEnd, map[string]any{"turn": 1, "reason": map[string]any{"kind": "completed"}})
	return l
}

func notFound(l *turnLog, seq int64) {
	l.result("x", seq, `Error: tool "erase_disk" not found`, "TOOL_NOT_FOUND")
}

// The turn check passes the logs the loop stores (the missing tool's one
// run, or its outcome-unknown result after a retry) and reports each
// planted defect.
func TestCheckTurnLog(t *testing.T) {
	fig, bad := checkTurnLog(goodTurn(t, notFound).events, true)
	require.Empty(t, bad)
	require.Equal(t, TurnFigures{Turns: 1, ModelCalls: 2, ToolCalls: 3}, fig)

	fig, bad = checkTurnLog(goodTurn(t, func(l *turnLog, seq int64) { l.unknown("x", seq) }).events, true)
	require.Empty(t, bad)
	require.Equal(t, 1, fig.OutcomeUnknown)

	// An open last turn is reported only by the final check.
	open := goodTurn(t, notFound).events
	open = open[:len(open)-1]
	_, bad = checkTurnLog(open, false)
	require.Empty(t, bad)
	_, bad = checkTurnLog(open, true)
	require.Equal(t, []string{"turn 1 is still open"}, bad)

	cases := []struct {
		name  string
		alter func(t *testing.T, evs []session.Event) []session.Event
		want  string
	}{
		{"a gap", func(t *testing.T, evs []session.Event) []session.Event {
			return append(evs[:3:3], evs[4:]...)
		}, "seq 4 at index 3: the log is not contiguous"},
		{"a second assistant message", func(t *testing.T, evs []session.Event) []session.Event {
			l := &turnLog{t: t, events: evs[:4:4]}
			l.message(1)
			return renumber(t, append(l.events, evs[4:]...))
		}, "a second assistant/message@4 for turn 1 step 1"},
		{"a duplicate tool call", func(t *testing.T, evs []session.Event) []session.Event {
			return renumber(t, append(append(evs[:5:5], evs[4]), evs[5:]...))
		}, `a second tool/call@5 for call "w" of turn 1`},
		{"an unanswered call", func(t *testing.T, evs []session.Event) []session.Event {
			return renumber(t, append(evs[:5:5], evs[6:]...))
		}, `step/end@9 with call "w" of turn 1 unanswered`},
		{"an idempotent call not re-run", func(t *testing.T, evs []session.Event) []session.Event {
			l := &turnLog{t: t, events: evs[:7:7]}
			l.unknown("r", 6)
			return append(l.events, evs[8:]...)
		}, `tool/result@7: the idempotent read_file call "r" got TOOL_OUTCOME_UNKNOWN instead of a re-run`},
		{"a read that misses the write", func(t *testing.T, evs []session.Event) []session.Event {
			l := &turnLog{t: t, events: evs[:7:7]}
			l.result("r", 6, "", "NOT_FOUND")
			return append(l.events, evs[8:]...)
		}, `tool/result@7: read_file of turn 1 read "" (code "NOT_FOUND"), not the notes the turn wrote`},
		{"a non-idempotent call with another outcome", func(t *testing.T, evs []session.Event) []session.Event {
			l := &turnLog{t: t, events: evs[:9:9]}
			l.result("x", 8, "erased", "")
			return append(l.events, evs[10:]...)
		}, `tool/result@9: erase_disk call "x" of turn 1: code "", neither its run's TOOL_NOT_FOUND nor TOOL_OUTCOME_UNKNOWN`},
		{"a second result", func(t *testing.T, evs []session.Event) []session.Event {
			return renumber(t, append(append(evs[:6:6], evs[5]), evs[6:]...))
		}, `a second tool/result@6 for call "w" of turn 1`},
		{"a turn ended by an error", func(t *testing.T, evs []session.Event) []session.Event {
			l := &turnLog{t: t, events: evs[: len(evs)-1 : len(evs)-1]}
			l.add(wire.TypeTurnEnd, map[string]any{"turn": 1, "reason": map[string]any{"kind": "error", "error": map[string]any{"message": "boom"}}})
			return l.events
		}, `turn 1 ended "error": {"reason":{"error":{"message":"boom"},"kind":"error"},"turn":1}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, bad := checkTurnLog(c.alter(t, goodTurn(t, notFound).events), true)
			require.Contains(t, bad, c.want)
		})
	}
}

// renumber gives evs the seqs 0.. in order, keeping each tool/result's
// sourceEventSeqs pointing at its tool/call.
func renumber(t *testing.T, evs []session.Event) []session.Event {
	out := make([]session.Event, len(evs))
	callSeq := map[string]int64{}
	for i, e := range evs {
		e.Seq = int64(i)
		switch e.Type {
		case wire.TypeToolCall:
			tc, err := e.ToolCall()
			require.NoError(t, err)
			callSeq[tc.CallID] = e.Seq
		case wire.TypeToolResult:
			var r struct {
				Message struct {
					Source struct {
						CallID string `json:"callId"`
					} `json:"source"`
				} `json:"message"`
			}
			require.NoError(t, json.Unmarshal(e.Data, &r))
			e.SourceEventSeqs = []int64{callSeq[r.Message.Source.CallID]}
		}
		out[i] = e
	}
	return out
}
