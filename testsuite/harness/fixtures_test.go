package harness

import (
	"os"
	"path/filepath"
	"testing"
)

// ev builds one event line as the harness validates it.
func ev(seq int, typ string, data map[string]any, extra ...any) map[string]any {
	e := map[string]any{"type": typ, "seq": seq, "time": 1767225600000 + int64(seq)*7, "data": data}
	for i := 0; i+1 < len(extra); i += 2 {
		e[extra[i].(string)] = extra[i+1]
	}
	return e
}

func userMessage(seq int, id, text string) map[string]any {
	return ev(seq, "user/message", map[string]any{"id": id, "role": "user",
		"content": []any{map[string]any{"type": "text", "text": text}}, "source": map[string]any{"kind": "user"}},
		"surfaceOp", "append")
}

func assistantMessage(seq, turn, step int, id string, content ...any) map[string]any {
	return ev(seq, "assistant/message", map[string]any{"turn": turn, "step": step, "message": map[string]any{
		"id": id, "role": "assistant", "source": map[string]any{"kind": "model", "provider": "deepseek", "model": "deepseek-chat"},
		"content": content}}, "surfaceOp", "append")
}

func text(s string) map[string]any { return map[string]any{"type": "text", "text": s} }

func toolCall(id, name string) map[string]any {
	return map[string]any{"type": "tool-call", "id": id, "name": name, "arguments": map[string]any{"path": "README.md"}}
}

// completedTurn is one whole turn from seq0: a question and an answer.
func completedTurn(seq0, turn int) []any {
	s := seq0
	return []any{
		ev(s, "turn/start", map[string]any{"turn": turn}),
		userMessage(s+1, "u"+itoa(turn), "What does README.md say?"),
		ev(s+2, "step/start", map[string]any{"turn": turn, "step": 1}),
		assistantMessage(s+3, turn, 1, "a"+itoa(turn), text("It says hello.")),
		ev(s+4, "step/end", map[string]any{"turn": turn, "step": 1}),
		ev(s+5, "turn/end", map[string]any{"turn": turn, "reason": map[string]any{"kind": "completed"}}),
	}
}

// interruptedTurn is a turn from seq0 that stopped while two tool calls
// were outstanding: call-1 was recorded as started (tool/call), call-2 not.
func interruptedTurn(seq0, turn int) []any {
	s := seq0
	return []any{
		ev(s, "turn/start", map[string]any{"turn": turn}),
		userMessage(s+1, "u"+itoa(turn), "Read it and write a summary."),
		ev(s+2, "step/start", map[string]any{"turn": turn, "step": 1}),
		assistantMessage(s+3, turn, 1, "a"+itoa(turn), text("Reading."), toolCall("call-1", "read_file"), toolCall("call-2", "write_file")),
		ev(s+4, "tool/call", map[string]any{"turn": turn, "step": 1, "callId": "call-1", "name": "read_file", "arguments": `{"path":"README.md"}`}),
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

func meta(id string, extra ...any) map[string]any {
	m := map[string]any{"version": 0, "id": id, "createdAt": 1767225600000, "cwd": "/work/project", "delegationDepth": 0}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i].(string)] = extra[i+1]
	}
	return m
}

func concat(parts ...[]any) []any {
	var out []any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// harnessSessions has the harness write, in root, the sessions the suite
// reads: "done" (a completed turn), "open" (a completed turn, then an
// interrupted one), "torn" (a completed turn, then a second batch cut in
// the middle of its last record or frame) and "fork" (a fork of "done" at
// its end, with one event of its own, so its header has seedLength).
func harnessSessions(t *testing.T, root, compression string) {
	t.Helper()
	rs := runHarness(t, root, compression,
		op{"op": "create", "meta": meta("done")},
		op{"op": "append", "id": "done", "events": completedTurn(0, 1)},
		op{"op": "create", "meta": meta("open")},
		op{"op": "append", "id": "open", "events": completedTurn(0, 1)},
		op{"op": "append", "id": "open", "events": interruptedTurn(6, 2)},
		op{"op": "create", "meta": meta("torn")},
		op{"op": "append", "id": "torn", "events": completedTurn(0, 1)},
		op{"op": "append", "id": "torn", "events": interruptedTurn(6, 2)[:3]},
		op{"op": "fork", "source": "done", "child": "fork", "append": [][]any{{"turn/start", map[string]any{"turn": 2}}}},
	)
	for i, r := range rs {
		mustOK(t, "write fixture op "+itoa(i), r)
	}
	// Cut the torn session's last batch inside its last record (raw) or
	// inside its last frame (zstd).
	path := logPath(root, "torn", 0, compression)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, fi.Size()-9); err != nil {
		t.Fatal(err)
	}
}

// logPath is the generation file of a session of the fixtures (cwd
// /work/project) in a format version and encoding.
func logPath(root, id string, version int, compression string) string {
	name := "session.jsonl"
	if version != 0 {
		name = "session.v" + itoa(version) + ".jsonl"
	}
	if compression == "zstd" {
		name += ".zstd"
	}
	return filepath.Join(root, "--work-project--", id, name)
}
