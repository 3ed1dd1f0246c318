package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// tornFragment is what a crash in the middle of writing a record leaves.
const tornFragment = `{"type":"assistant/chunk","seq":4,"ti`

// writeRawOpenTurnLog writes, byte by byte as a crashed harness leaves it, a
// raw log whose turn is open with a recorded tool call and whose last record
// is torn. It returns the committed bytes (everything but the fragment).
func writeRawOpenTurnLog(t *testing.T, root, id string) (path string, committed string) {
	t.Helper()
	path = logPath(t, root, "none", id)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	committed = `{"type":"session","version":3,"id":"` + id + `","createdAt":1700000000000,"isSeeded":false,"delegationDepth":0}` + "\n" +
		`{"type":"turn/start","seq":0,"time":1700000000000,"data":{"turn":1}}` + "\n" +
		`{"type":"step/start","seq":1,"time":1700000000100,"data":{"turn":1,"step":1}}` + "\n" +
		`{"type":"assistant/message","seq":2,"time":1700000000200,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"call-1","name":"read_file","arguments":{"path":"a.txt"}}]},"stream":[]},"surfaceOp":"append"}` + "\n" +
		`{"type":"tool/call","seq":3,"time":1700000000300,"data":{"turn":1,"step":1,"callId":"call-1","name":"read_file","arguments":"{\"path\":\"a.txt\"}"}}` + "\n"
	require.NoError(t, os.WriteFile(path, []byte(committed+tornFragment), 0o600))
	return path, committed
}

// inspectJSON runs `log inspect --json` and decodes it.
func inspectJSON(t *testing.T, root, comp, id string) map[string]any {
	t.Helper()
	r := mustOK(t, logCmd(t, root, comp, "", "inspect", "--id", id, "--json"))
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &m))
	return m
}

func TestRepairHandWrittenRawLog(t *testing.T) {
	root := t.TempDir()
	path, committed := writeRawOpenTurnLog(t, root, "crashed")
	original := readFile(t, path)

	// inspect, text.
	r := mustOK(t, logCmd(t, root, "none", "", "inspect", "--id", "crashed"))
	for _, want := range []string{
		`session:         "crashed"`,
		"events:          4\n",
		"next seq:        4\n",
		"last turn/end:   none\n",
		"open turn:       turn 1, step 1 open\n",
		`dangling call:   "call-1" (step 1), recorded as tool/call seq 3` + "\n",
		"torn tail:       " + strconv.Itoa(len(tornFragment)) + " bytes\n",
		"committed:       " + strconv.Itoa(len(committed)) + " bytes\n",
		"file size:       " + strconv.Itoa(len(original)) + " bytes\n",
		"lease:           none\n",
	} {
		require.Contains(t, r.stdout, want)
	}

	// inspect, JSON.
	m := inspectJSON(t, root, "none", "crashed")
	require.Equal(t, float64(len(tornFragment)), m["tornBytes"])
	require.Equal(t, float64(len(committed)), m["committedBytes"])
	require.Equal(t, float64(len(original)), m["fileSize"])
	require.Equal(t, float64(4), m["eventCount"])
	require.Equal(t, float64(4), m["nextSeq"])
	require.Equal(t, float64(1), m["lastTurn"])
	require.Nil(t, m["lastTurnEndSeq"])
	require.Nil(t, m["lease"])
	require.Equal(t, path, m["path"])
	require.Equal(t, map[string]any{
		"turn": float64(1),
		"step": float64(1),
		"pendingCalls": []any{map[string]any{
			"callId": "call-1", "step": float64(1), "recorded": true, "callSeq": float64(3),
		}},
	}, m["openTurn"])
	require.Equal(t, "crashed", m["header"].(map[string]any)["id"])

	// cat shows the valid records and modifies nothing.
	lines := catLines(t, root, "none", "crashed")
	require.Equal(t, strings.Split(strings.TrimSuffix(committed, "\n"), "\n"), lines)
	require.Equal(t, original, readFile(t, path), "inspect and cat never modify the log")

	// repair.
	r = mustOK(t, logCmd(t, root, "none", "", "repair", "--id", "crashed"))
	require.Equal(t, "4 tool/result TOOL_OUTCOME_UNKNOWN\n5 step/end\n6 turn/end\n7 session/end-seed\n", r.stdout)
	require.Contains(t, r.stderr, "torn tail", "the store warns about the cut tail")
	require.Nil(t, leaseOf(t, root, "none", "crashed"))

	lines = catLines(t, root, "none", "crashed")
	require.Len(t, lines, 9)
	events := decodeEvents(t, lines[1:])
	closers, err := session.InterruptedTurnClosers(events[:4])
	require.NoError(t, err)
	marker, due := session.EndSeedMarker(events[:7], false, 1700000000300)
	require.True(t, due)
	require.Equal(t, jsonlOf(t, append(closers, marker)...), strings.Join(lines[5:], "\n")+"\n")
	result, err := events[4].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "call-1", result.Message.Source.CallID)
	require.Equal(t, []int64{3}, events[4].SourceEventSeqs)
	end, err := events[6].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "interrupted", string(end.Reason.Kind))
	for _, e := range events[4:] {
		require.Equal(t, int64(1700000000300), e.Time, "closers and marker carry the last event's time")
	}

	// Append-only: the committed prefix is byte-for-byte the head of the
	// file, the fragment is gone and the repair batch follows it directly.
	raw := string(readFile(t, path))
	require.Equal(t, committed+jsonlOf(t, events[4:]...), raw)

	require.Equal(t, "nothing to repair\n", mustOK(t, logCmd(t, root, "none", "", "repair", "--id", "crashed")).stdout)
	require.Equal(t, raw, string(readFile(t, path)))

	m = inspectJSON(t, root, "none", "crashed")
	require.Equal(t, float64(0), m["tornBytes"])
	require.Nil(t, m["openTurn"])
	require.Equal(t, float64(6), m["lastTurnEndSeq"])
	require.Equal(t, float64(8), m["nextSeq"])
}

func TestRepairZstdTornFrame(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	st := newTestStore(t, root, "zstd")
	h, err := st.Create(ctx, wire.Header{ID: "z", CreatedAt: 1700000000000}, jsonl.CreateOptions{HandleID: "test/z", Owner: jsonl.Owner{WorkflowID: "session/z"}})
	require.NoError(t, err)
	require.NoError(t, h.Append(ctx, openTurnEvents(t, true)))
	require.NoError(t, h.Close(ctx))

	path := logPath(t, root, "zstd", "z")
	intact := readFile(t, path)
	// A crash while writing the next frame: its first bytes (magic number,
	// descriptor and part of the header) reached the disk.
	torn := append([]byte(nil), intact[:6]...)
	appendBytes(t, path, torn)
	original := readFile(t, path)

	m := inspectJSON(t, root, "zstd", "z")
	require.Equal(t, float64(6), m["tornBytes"])
	require.Equal(t, float64(len(intact)), m["committedBytes"])
	require.Equal(t, float64(4), m["eventCount"])
	require.Equal(t, float64(0), m["recoveredEvents"])
	require.Equal(t, []any{
		map[string]any{"callId": "call-1", "step": float64(1), "recorded": true, "callSeq": float64(3)},
		map[string]any{"callId": "call-2", "step": float64(1), "recorded": false, "callSeq": nil},
	}, m["openTurn"].(map[string]any)["pendingCalls"])
	r := mustOK(t, logCmd(t, root, "zstd", "", "inspect", "--id", "z"))
	require.Contains(t, r.stdout, `dangling call:   "call-2" (step 1), not recorded as started`)
	require.Len(t, catLines(t, root, "zstd", "z"), 5)
	require.Equal(t, original, readFile(t, path))

	r = mustOK(t, logCmd(t, root, "zstd", "", "repair", "--id", "z"))
	require.Equal(t, "4 tool/result TOOL_OUTCOME_UNKNOWN\n5 tool/result TOOL_NOT_STARTED\n6 step/end\n7 turn/end\n8 session/end-seed\n", r.stdout)

	lines := catLines(t, root, "zstd", "z")
	require.Len(t, lines, 10)
	events := decodeEvents(t, lines[1:])
	closers, err := session.InterruptedTurnClosers(events[:4])
	require.NoError(t, err)
	require.Equal(t, jsonlOf(t, closers...), strings.Join(lines[5:9], "\n")+"\n")
	require.Equal(t, wire.TypeEndSeed, events[8].Type)

	after := readFile(t, path)
	require.Equal(t, intact, after[:len(intact)], "the committed frames are untouched")
	m = inspectJSON(t, root, "zstd", "z")
	require.Equal(t, float64(0), m["tornBytes"])
	require.Nil(t, m["openTurn"])
	require.Equal(t, "nothing to repair\n", mustOK(t, logCmd(t, root, "zstd", "", "repair", "--id", "z")).stdout)
	require.Equal(t, after, readFile(t, path))
}

func TestRepairBalancedLogAddsOnlyTheMarker(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			mustOK(t, logCmd(t, root, comp, "", "create", "--id", "s"))
			mustOK(t, logCmd(t, root, comp, string(readFile(t, "../../testdata/sample.jsonl")), "append", "--id", "s"))
			r := mustOK(t, logCmd(t, root, comp, "", "repair", "--id", "s"))
			require.Equal(t, "17 session/end-seed\n", r.stdout)
			require.Equal(t, "nothing to repair\n", mustOK(t, logCmd(t, root, comp, "", "repair", "--id", "s")).stdout)
			lines := catLines(t, root, comp, "s")
			require.Equal(t, `{"type":"session/end-seed","seq":17,"time":1767225642381,"data":{}}`, lines[len(lines)-1])
		})
	}
}

func TestRepairWithNothingDueLeavesTornTail(t *testing.T) {
	for _, comp := range compressions {
		t.Run(comp, func(t *testing.T) {
			root := t.TempDir()
			mustOK(t, logCmd(t, root, comp, "", "create", "--id", "s"))
			require.Equal(t, "0 session/end-seed\n", mustOK(t, logCmd(t, root, comp, "", "repair", "--id", "s")).stdout)
			path := logPath(t, root, comp, "s")
			// A crash while writing the first live event after the marker.
			fragment := []byte(`{"type":"turn/st`)
			if comp == "zstd" {
				fragment = readFile(t, path)[:7]
			}
			appendBytes(t, path, fragment)
			torn := readFile(t, path)

			r := mustOK(t, logCmd(t, root, comp, "", "repair", "--id", "s"))
			require.Equal(t, "nothing to repair\na torn tail of "+strconv.Itoa(len(fragment))+" bytes stays in place until the next append cuts it\n", r.stdout)
			require.Equal(t, torn, readFile(t, path))

			mustOK(t, logCmd(t, root, comp, jsonlOf(t, ev(t, wire.TypeTurnStart, 1, 5, `{"turn":1}`)), "append", "--id", "s"))
			require.Equal(t, float64(0), inspectJSON(t, root, comp, "s")["tornBytes"])
			require.Len(t, catLines(t, root, comp, "s"), 3)
		})
	}
}

func TestInspectCorruptAndMissing(t *testing.T) {
	root := t.TempDir()
	path, committed := writeRawOpenTurnLog(t, root, "bad")
	// A damaged record followed by a turn/end is committed damage: the log is
	// refused, not repaired.
	require.NoError(t, os.WriteFile(path, []byte(committed+"{not json\n"+
		`{"type":"turn/end","seq":5,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`+"\n"), 0o600))
	for _, sub := range []string{"inspect", "cat", "repair"} {
		mustFail(t, logCmd(t, root, "none", "", sub, "--id", "bad"), 1, `session "bad": stored log is corrupt`)
	}
	mustFail(t, logCmd(t, root, "none", "", "inspect", "--id", "missing"), 1, `session "missing" not found`)

	// A valid envelope whose repair-relevant payload is unreadable: inspect
	// reports it, repair refuses to guess.
	path = logPath(t, root, "none", "odd")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte(`{"type":"session","version":3,"id":"odd","createdAt":1,"isSeeded":false,"delegationDepth":0}`+"\n"+
		`{"type":"turn/start","seq":0,"time":1,"data":{}}`+"\n"), 0o600))
	r := mustOK(t, logCmd(t, root, "none", "", "inspect", "--id", "odd"))
	require.Regexp(t, `(?m)^open turn: +unreadable: .+$`, r.stdout)
	m := inspectJSON(t, root, "none", "odd")
	require.Nil(t, m["openTurn"])
	require.NotEmpty(t, m["openTurnError"])
	mustFail(t, logCmd(t, root, "none", "", "repair", "--id", "odd"), 1, "scan the open turn")
	require.Nil(t, leaseOf(t, root, "none", "odd"), "a failed repair releases its lease")
}
