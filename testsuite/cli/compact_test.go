package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/wire"
)

// logLines is `starter log cat`'s output for id, its header line left
// out.
func (e *env) logLines(id string) []string {
	out, errOut, err := logCLI(e.t, e.root, "cat", "--id", id)
	require.NoError(e.t, err, errOut)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	require.NotEmpty(e.t, lines)
	return lines[1:]
}

// eventType is the type of a log line.
func eventType(t *testing.T, line string) string {
	var ev struct {
		Type string `json:"type"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &ev), line)
	return ev.Type
}

// `starter compact` on a fresh session prints that nothing can be
// compacted; after two turns a failed summary exits 1 with the harness's
// text, and the next compact replaces the conversation with the summary:
// it prints "Compacted N history items (~T tokens).", `starter log cat`
// shows every event stored before plus the compaction's, and the next
// turn's request holds the summary in place of the first turn (the model
// answers with the response of a conversation of one assistant message).
// A session without a route is refused.
func TestStarterCompact(t *testing.T) {
	e := newEnv(t)
	// Two answers, then nothing: a third ordinary call whose conversation
	// holds two assistant messages finds the script exhausted. Every
	// compaction call is answered with the summary, but a session's first
	// one fails.
	script := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{
		"compaction": {"text": "The user said hello twice.", "chunkSize": 6,
		               "fail": {"status": 500, "message": "summariser down", "attempts": 1}},
		"responses": [{"text": "First answer."}, {"text": "Second answer."}]
	}`), 0o644))
	e.workerArgs = []string{"--provider-script", script}
	e.startWorker(true)
	e.mustStarter("", "create", "--id", "k1", "--provider", "scripted", "--model", "m1")

	require.Equal(t, "No compactable history yet.\n", e.mustStarter("", "compact", "--id", "k1"))

	require.Contains(t, e.mustStarter("", "turn", "--id", "k1", "--prompt", longPrompt, "--root", e.root), "First answer.\nturn 1 completed\n")
	require.Contains(t, e.mustStarter("", "turn", "--id", "k1", "--prompt", "hello again", "--root", e.root), "Second answer.\nturn 2 completed\n")
	before := e.logLines("k1")

	out, err := e.starter("", "compact", "--id", "k1", "--command-id", "cmd-fail")
	require.ErrorContains(t, err, "exit status 1")
	require.ErrorContains(t, err, `starter: compaction failed: session "k1": `)
	require.ErrorContains(t, err, "summariser down")
	require.Equal(t, "Compaction could not produce a useful summary. The conversation is unchanged; the attempt is recorded in the session log.\n", out)

	require.Equal(t, "Compacted 3 history items (~283 tokens).\n", e.mustStarter("", "compact", "--id", "k1", "--command-id", "cmd-1"))

	after := e.logLines("k1")
	require.Equal(t, before, after[:len(before)], "every event stored before is still there, unchanged")
	var added []string
	for _, line := range after[len(before):] {
		added = append(added, eventType(t, line))
	}
	require.Equal(t, []string{
		"command/run", "compaction/start", "compaction/end", "command/done",
		"command/run", "compaction/start", "compaction/summary", "user/message", "compaction/end", "command/done",
	}, added)
	evs := e.stored("k1")
	requireContiguous(t, evs)
	done := evs[len(evs)-1]
	require.JSONEq(t, `{"commandId":"cmd-1","kind":"success","text":"Compacted 3 history items (~283 tokens).","sourceEventSeq":`+
		strconv.FormatInt(evs[len(evs)-4].Seq, 10)+`}`, string(done.Data))
	require.Contains(t, string(evs[len(evs)-4].Data), `"The user said hello twice."`)

	// The model now sees the summary and the last answer: one assistant
	// message, so the script's second response answers; without the
	// compaction the call would find the script exhausted.
	require.Contains(t, e.mustStarter("", "turn", "--id", "k1", "--prompt", "and now?", "--root", e.root), "Second answer.\nturn 3 completed\n")

	e.mustStarter("", "create", "--id", "k2")
	_, err = e.starter("", "compact", "--id", "k2")
	require.ErrorContains(t, err, "starter: Compact: the session's agent has no model route (agentOptions provider and model)")
	e.mustStarter("", "dispose", "--id", "k1")
	e.mustStarter("", "dispose", "--id", "k2")
	requireContiguous(t, e.stored("k1"))
}

// longPrompt is a first message long enough for a summary to be worth it
// (the framed summary must be smaller than what it replaces).
var longPrompt = "hello," + strings.Repeat(" here is a long story about nothing in particular;", 20)

// `/compact` in a chat on a terminal: on a fresh session it says nothing
// can be compacted; after two turns it shows its progress ("compacting…",
// then, once the log holds its compaction/start, "summarising the earlier
// conversation…"), Ctrl-C cancels it, and the next /compact prints its
// result. None of it reaches the model as a message: the next prompt's
// turn sees the summary in place of the first turn.
func TestChatCompactOnATerminal(t *testing.T) {
	e := newEnv(t)
	path := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(path, []byte(`{
		"compaction": {"text": "The user said hello twice.", "chunkSize": 6, "stall": {"afterChunks": 1, "attempts": 1}},
		"responses": [{"text": "First answer."}, {"text": "Second answer."}]
	}`), 0o644))
	e.workerArgs = []string{"--provider-script", path}
	e.startWorker(true)

	term := e.chat("--id", "q1", "--provider", "scripted", "--model", "m1", "--root", e.root, "--compression", "none")
	term.expect(`session "q1" created`)
	term.expect("> ")
	term.typeKeys("/compact\r")
	term.expect("compacting…")
	term.expect("No compactable history yet.")

	term.expect("> ")
	term.typeKeys(longPrompt + "\r")
	term.expect("First answer.")
	term.expect("[turn 1 completed]")
	term.expect("> ")
	term.typeKeys("hello again\r")
	term.expect("Second answer.")
	term.expect("[turn 2 completed]")

	// The summary stalls: Ctrl-C cancels the compaction.
	term.expect("> ")
	term.typeKeys("/compact\r")
	term.expect("compacting…")
	term.expect("summarising the earlier conversation…")
	term.typeKeys("\x03")
	term.expect("^C cancelling the compaction")
	term.expect("Compaction cancelled.")

	term.expect("> ")
	term.typeKeys("/compact\r")
	term.expect("compacting…")
	term.expect("Compacted 3 history items (~283 tokens).")

	// One assistant message left: the script's second response answers
	// (the third would be "script exhausted").
	term.expect("> ")
	term.typeKeys("and now?\r")
	term.expect("Second answer.")
	term.expect("[turn 3 completed]")
	term.expect("> ")
	term.typeKeys("\x03")
	term.expect(`session "q1" disposed`)
	require.NoError(t, term.wait(), term.out.String())

	evs := e.stored("q1")
	requireContiguous(t, evs)
	var done []string
	var users []string
	for _, ev := range evs {
		switch ev.Type {
		case wire.TypeCommandDone:
			var d struct {
				Kind string `json:"kind"`
				Text string `json:"text"`
			}
			require.NoError(t, json.Unmarshal(ev.Data, &d))
			done = append(done, d.Kind+": "+d.Text)
		case wire.TypeUserMessage:
			users = append(users, userText(t, ev.Data))
		}
	}
	require.Equal(t, []string{
		"success: No compactable history yet.",
		"error: Compaction cancelled.",
		"success: Compacted 3 history items (~283 tokens).",
	}, done)
	require.Len(t, users, 4, "the two prompts, the summary, the third prompt, no /compact: %q", users)
	require.Equal(t, longPrompt, users[0])
	require.Equal(t, "hello again", users[1])
	require.Contains(t, users[2], "The user said hello twice.")
	require.Equal(t, "and now?", users[3])
}

// userText joins the text blocks of a user/message's data.
func userText(t *testing.T, data json.RawMessage) string {
	var m struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	require.NoError(t, json.Unmarshal(data, &m), string(data))
	var b strings.Builder
	for _, c := range m.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}
