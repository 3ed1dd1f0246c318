package agent_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// largeAnswer is a response of about 96 KiB of text in 2000 deltas, each
// holding a marker found nowhere else ("M-<i>;"), a tool call whose
// arguments hold "ARGS-MARKER", usage and a max-tokens finish (which a
// reader cannot guess from the content: it is read from the stream).
func largeAnswer() (response, string) {
	r := response{chunks: []provider.Chunk{reasoning("REASONING-MARKER ")}}
	var all strings.Builder
	for i := range 2000 {
		d := fmt.Sprintf("M-%04d; %s\n", i, strings.Repeat("x", 40))
		all.WriteString(d)
		r.chunks = append(r.chunks, text(d))
	}
	r.chunks = append(r.chunks, callChunk(0, "call-1", "echo", `{"text":"ARGS-MARKER"}`),
		usage(1234, 5678), finish(provider.FinishMaxTokens))
	return r, all.String()
}

// storedLine is the stored JSONL line of e.
func storedLine(t *testing.T, e session.Event) string {
	t.Helper()
	line, err := e.MarshalJSON()
	require.NoError(t, err)
	return string(line)
}

// TestCallModelStoresALargeAnswersTextOnce: the model call of an answer
// whose text is past agent.StreamTextLimit stores each piece of its text
// once, in the message (its chunks would repeat every delta beside the
// content, and again in the block-ends): of its chunks only the usage and
// finish are stored; its finish reason and usage still read back when the
// call is retried, and the next step's request carries the text once.
func TestCallModelStoresALargeAnswersTextOnce(t *testing.T) {
	r, all := largeAnswer()
	require.Greater(t, len(all), agent.StreamTextLimit)
	f := newFixture(t, newTools(t, echoTool("echo", false, true, nil)), r, answer("done"))
	first, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.Equal(t, provider.FinishMaxTokens, first.Finish)
	require.Equal(t, &provider.Usage{InputTokens: 1234, OutputTokens: 5678}, first.Usage)

	log := f.log()
	require.Equal(t, callTypes(2), types(log))
	lines := strings.Join(storedLines(t, log), "\n")
	for _, marker := range []string{"M-0000;", "M-0999;", "M-1999;", "REASONING-MARKER", "ARGS-MARKER"} {
		require.Equal(t, 1, strings.Count(lines, marker), "%q in the stored lines of %d bytes", marker, len(lines))
	}
	esc, err := json.Marshal(all)
	require.NoError(t, err)
	require.Less(t, len(lines), len(esc)+2048, "the stored lines are about the answer's size")
	d := dataOf(t, log[6])
	msg := d["message"].(map[string]any)
	content := msg["content"].([]any)
	require.Len(t, content, 3)
	require.True(t, content[1].(map[string]any)["text"] == all, "the content holds the whole text")
	require.NotContains(t, d, "stream")
	require.Equal(t, []int64{4, 5}, log[6].SourceEventSeqs)
	require.Equal(t, `{"turn":1,"step":1,"chunk":{"type":"usage","usage":{"inputTokens":1234,"outputTokens":5678}}}`, string(log[4].Data))
	require.Equal(t, `{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"max-tokens"}}}`, string(log[5].Data))
	require.Equal(t, map[string]any{"inputTokens": 1234.0, "outputTokens": 5678.0}, d["usage"])
	require.NoError(t, session.CheckAppendable(wire.Header{Version: wire.FormatVersion}, 3, log[3:]))

	// A retry, here or on another worker, reuses the stored message with
	// its finish reason (read from its finish chunk) and usage.
	for _, acts := range []*agent.Activities{f.acts, f.actsOn(f.newStore())} {
		again, err := f.callModel(acts, f.modelInput(1, 1))
		require.NoError(t, err)
		require.True(t, again.Reused)
		again.Reused = false
		require.Equal(t, first, again)
	}
	require.Equal(t, 1, f.prov.calls())

	// The next step's request carries the text once.
	f.append(ev(t, wire.TypeStepStart, 7, `{"turn":1,"step":2}`))
	_, err = f.callModel(f.acts, f.modelInput(1, 2))
	require.NoError(t, err)
	require.Equal(t, 2, f.prov.calls())
	req, err := json.Marshal(f.prov.requests[1].Messages)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(req), "M-1234;"), "the next request holds the text once")
	require.Less(t, len(req), len(esc)+2048)
}

// citedRecord is the record of the assistant/chunk events message e of
// log cites.
func citedRecord(t *testing.T, log []session.Event, e session.Event) []provider.RecordedChunk {
	t.Helper()
	var out []provider.RecordedChunk
	for _, seq := range e.SourceEventSeqs {
		c := log[seq]
		require.Equal(t, wire.TypeAssistantChunk, c.Type)
		var d struct {
			Chunk json.RawMessage `json:"chunk"`
		}
		require.NoError(t, json.Unmarshal(c.Data, &d))
		out = append(out, provider.RecordedChunk{Time: c.Time, Chunk: d.Chunk})
	}
	return out
}

// TestCallModelKeepsAShortAnswersChunks: an answer within
// agent.StreamTextLimit keeps all its chunks, which replay to the stored
// content, usage and finish.
func TestCallModelKeepsAShortAnswersChunks(t *testing.T) {
	r := response{chunks: []provider.Chunk{reasoning("th"), reasoning("ink"), text("Hel"), text("lo"),
		callChunk(0, "call-1", "echo", `{"te`), callChunk(0, "", "", `xt":"a"}`), usage(3, 4), finish(provider.FinishToolCalls)}}
	f := newFixture(t, newTools(t, echoTool("echo", false, true, nil)), r)
	_, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	log := f.log()
	msg := log[len(log)-1]
	m, err := msg.AssistantMessage()
	require.NoError(t, err)
	require.Len(t, msg.SourceEventSeqs, 14)
	chunks, err := provider.ReplayRecord(citedRecord(t, log, msg))
	require.NoError(t, err)
	a := provider.NewAssembler()
	for _, c := range chunks {
		require.NoError(t, a.Push(c.Chunk, c.Time))
	}
	content, err := json.Marshal(a.Content())
	require.NoError(t, err)
	stored, err := json.Marshal(m.Message.Content)
	require.NoError(t, err)
	require.JSONEq(t, string(stored), string(content))
	require.Equal(t, &provider.Usage{InputTokens: 3, OutputTokens: 4}, a.Usage())
	require.Equal(t, provider.FinishToolCalls, a.Finish())
}

// oldStream is the stream record an older writer stored in
// assistant/message.stream: one {"type":"chunk","time":T,"chunk":{...}}
// record per chunk.
func oldStream(t *testing.T, chunks []provider.Chunk) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, len(chunks))
	for i, c := range chunks {
		b, err := json.Marshal(map[string]any{"type": "chunk", "time": 1000 + i, "chunk": c})
		require.NoError(t, err)
		out[i] = b
	}
	return out
}

// TestCallModelReadsAnOldLargeMessage: a message stored before the stream
// was stored as chunks (its stream record repeats every delta, and there
// is no chunk event) is still reused with the finish reason of its stream,
// and sent once in the next request.
func TestCallModelReadsAnOldLargeMessage(t *testing.T) {
	r, all := largeAnswer()
	old := provider.NewAssembler()
	for i, c := range r.chunks {
		require.NoError(t, old.Push(c, int64(1000+i)))
	}
	data, err := session.MarshalData(map[string]any{
		"turn": 1, "step": 1,
		"message": map[string]any{"id": "assistant-1-1", "role": "assistant", "content": old.Content(),
			"source": map[string]any{"provider": "fake", "model": "m1"}},
		"stream": oldStream(t, r.chunks), "usage": old.Usage(),
	})
	require.NoError(t, err)
	f := newFixture(t, newTools(t, echoTool("echo", false, true, nil)), answer("unused"), answer("done"))
	e, err := session.NewEvent(wire.TypeAssistantMessage, 3, 2000, data)
	require.NoError(t, err)
	e.SurfaceOp = session.AppendOp()
	f.append(e)
	require.Equal(t, 2, strings.Count(storedLine(t, f.log()[3]), "M-0500;"), "the old record repeats the text")

	res, err := f.callModel(f.acts, f.modelInput(1, 1))
	require.NoError(t, err)
	require.True(t, res.Reused)
	require.Equal(t, provider.FinishMaxTokens, res.Finish)
	require.Equal(t, &provider.Usage{InputTokens: 1234, OutputTokens: 5678}, res.Usage)
	require.Equal(t, []agent.CallRef{{ID: "call-1", Name: "echo"}}, res.ToolCalls)
	require.Equal(t, 0, f.prov.calls())

	f.append(ev(t, wire.TypeStepStart, 4, `{"turn":1,"step":2}`))
	_, err = f.callModel(f.acts, f.modelInput(1, 2))
	require.NoError(t, err)
	req, err := json.Marshal(f.prov.requests[0].Messages)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(req), "M-0500;"))
	sent := f.prov.requests[0].Messages[1].Content
	require.Len(t, sent, 3)
	require.True(t, sent[1].Text == all, "the next request carries the whole text")
}

// TestCallModelLargeInterruptedAnchorHoldsItsTextOnce: the anchor of a
// cancelled call that had shown more than agent.StreamTextLimit holds the
// shown text once and cites no chunk (none came but text).
func TestCallModelLargeInterruptedAnchorHoldsItsTextOnce(t *testing.T) {
	r, _ := largeAnswer()
	shown := r.chunks[:1500] // reasoning and 1499 text deltas
	f := newFixture(t, nil, response{chunks: shown, stall: true})
	require.Error(t, cancelAfter(t, f, len(shown), temporal.NewCanceledError()))
	log := f.log()
	require.Equal(t, callTypes(0), types(log))
	lines := strings.Join(storedLines(t, log), "\n")
	for _, marker := range []string{"M-0000;", "M-1498;", "REASONING-MARKER"} {
		require.Equal(t, 1, strings.Count(lines, marker), "%q in the stored lines", marker)
	}
	d := dataOf(t, log[4])
	require.Equal(t, true, d["interrupted"])
	require.NotContains(t, d, "stream")
	require.Empty(t, log[4].SourceEventSeqs)
	files, err := filepath.Glob(filepath.Join(f.root, "*", "*", "session.v3.jsonl"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	raw, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.Contains(t, string(raw), `"interrupted":true},"surfaceOp":"append","sourceEventSeqs":[]}`+"\n", "the anchor cites no chunk")
}
