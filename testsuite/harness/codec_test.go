package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// codec runs ops through testdata/harness/codec.mjs, the pinned session
// package's pure functions, and returns their outcomes.
func codec(t *testing.T, ops ...op) []result {
	t.Helper()
	node := nodeBinary(t)
	in, err := json.Marshal(map[string]any{"ops": ops})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "codec.mjs")
	cmd.Dir = harnessDir
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "codec.mjs: %s", stderr.String())
	var out []result
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &out), stdout.String())
	require.Len(t, out, len(ops))
	return out
}

// The vocabulary sessionflow generated (tools/harnessvocab) is the pinned
// package's own list, from the release pinned in testdata/harness. A new
// harness release fails here until session/harness_types.go is
// regenerated.
func TestVocabularyIsThePinnedHarnesss(t *testing.T) {
	out := codec(t, op{"op": "known"})
	var known []string
	require.NoError(t, json.Unmarshal(mustOK(t, "known", out[0]), &known))
	slices.Sort(known)
	require.Equal(t, known, session.HarnessEventTypes(),
		"session/harness_types.go is not the pinned harness's vocabulary: run `go run ./harnessvocab` in tools/")
	for _, typ := range known {
		require.True(t, session.KnownEventType(typ), typ)
	}

	raw, err := os.ReadFile(filepath.Join(harnessDir, "node_modules", "@deepseek-ai", "dsh-session", "package.json"))
	require.NoError(t, err)
	var manifest struct{ Version string }
	require.NoError(t, json.Unmarshal(raw, &manifest))
	require.Equal(t, manifest.Version, session.HarnessVersion)
}

// rawEvents is events as the store encodes them, keys in their order, for
// the harness to take as they are.
func rawEvents(t *testing.T, events []session.Event) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, len(events))
	for i, e := range events {
		b, err := e.MarshalJSON()
		require.NoError(t, err)
		out[i] = b
	}
	return out
}

// chunkBatch is a random batch of events in which runs of delta chunks of
// every kind are interleaved with other chunks and events: blocks change,
// turns and steps change, times go back and jump, tool calls change ids
// and names, and some runs are too short to pack.
func chunkBatch(r *rand.Rand, seq0 int64) []session.Event {
	var out []session.Event
	seq, tm := seq0, int64(1_700_000_000_000)
	add := func(typ, data string) {
		out = append(out, session.Event{Type: typ, Seq: seq, Time: tm, Data: json.RawMessage(data)})
		seq++
		switch r.IntN(6) {
		case 0:
			tm -= int64(r.IntN(50))
		case 1:
			tm += int64(r.IntN(1 << 40))
		default:
			tm += int64(r.IntN(20))
		}
	}
	turn, step := 1, 1
	for range 4 + r.IntN(8) {
		if r.IntN(4) == 0 {
			turn, step = turn+r.IntN(2), step+1
		}
		index := r.IntN(3)
		n := 1 + r.IntN(6)
		switch r.IntN(6) {
		case 0, 1:
			for i := range n {
				add(wire.TypeAssistantChunk, fmt.Sprintf(`{"turn":%d,"step":%d,"chunk":{"type":"text-delta","index":%d,"text":%q}}`, turn, step, index, fmt.Sprintf("t%d\n\"x\"", i)))
			}
		case 2:
			for i := range n {
				add(wire.TypeAssistantChunk, fmt.Sprintf(`{"turn":%d,"step":%d,"chunk":{"type":"reasoning-delta","index":%d,"text":"r%d"}}`, turn, step, index, i))
			}
		case 3:
			id := fmt.Sprintf("call-%d", r.IntN(2))
			named := r.IntN(2) == 0
			for i := range n {
				if r.IntN(5) == 0 {
					named = !named
				}
				name := ""
				if named {
					name = `,"name":"read_file"`
				}
				add(wire.TypeAssistantChunk, fmt.Sprintf(`{"turn":%d,"step":%d,"chunk":{"type":"tool-call-delta","index":%d,"id":%q%s,"argumentsDelta":"{\"a\":%d"}}`, turn, step, index, id, name, i))
			}
		case 4:
			add(wire.TypeAssistantChunk, fmt.Sprintf(`{"turn":%d,"step":%d,"chunk":{"type":"block-start","index":%d,"blockType":"text"}}`, turn, step, index))
			add(wire.TypeAssistantChunk, fmt.Sprintf(`{"turn":%d,"step":%d,"chunk":{"type":"usage","usage":{"inputTokens":3,"outputTokens":4}}}`, turn, step))
		default:
			add(wire.TypeStepStart, fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
		}
	}
	return out
}

// sessionflow packs chunk runs exactly as the pinned package's
// packChunkRuns does, line for line, and each side expands the other's
// rows into the events that were packed.
func TestPackedRowsMatchTheHarnessPacker(t *testing.T) {
	r := rand.New(rand.NewPCG(24, 1))
	var batches [][]session.Event
	for i := range 200 {
		batches = append(batches, chunkBatch(r, int64(i*3)))
	}
	var ops []op
	for _, b := range batches {
		ops = append(ops, op{"op": "pack", "events": rawEvents(t, b)})
	}
	packed := codec(t, ops...)

	rows := 0
	ops = ops[:0]
	for i, b := range batches {
		var harnessLines []string
		require.NoError(t, json.Unmarshal(mustOK(t, "pack", packed[i]), &harnessLines))
		ours, err := session.AppendPackedLines(nil, b)
		require.NoError(t, err)
		ourLines := strings.Split(strings.TrimSuffix(string(ours), "\n"), "\n")
		require.Equal(t, harnessLines, ourLines, "batch %d", i)
		for _, l := range ourLines {
			if strings.HasPrefix(l, `{"type":"text-chunks"`) || strings.HasPrefix(l, `{"type":"reasoning-chunks"`) || strings.HasPrefix(l, `{"type":"tool-call-chunks"`) {
				rows++
			}
		}
		ops = append(ops, op{"op": "decode", "lines": ourLines})

		// sessionflow expands the harness's rows into the batch's events.
		var d session.LineDecoder
		var expanded []session.Event
		for _, l := range harnessLines {
			e, err := d.Decode([]byte(l))
			require.NoError(t, err, l)
			if session.IsChunkRow(e) {
				members, err := session.ExpandChunkRow(e)
				require.NoError(t, err)
				expanded = append(expanded, members...)
				continue
			}
			expanded = append(expanded, e)
		}
		equalJSON(t, fmt.Sprintf("batch %d expanded by sessionflow", i), asJSON(t, expanded), asJSON(t, b))
	}
	require.Greater(t, rows, 100, "the batches hold packable runs")

	// The harness expands sessionflow's rows into the batch's events.
	decoded := codec(t, ops...)
	for i, b := range batches {
		var events []any
		require.NoError(t, json.Unmarshal(mustOK(t, "decode", decoded[i]), &events))
		equalJSON(t, fmt.Sprintf("batch %d expanded by the harness", i), events, asJSON(t, b))
	}
}
