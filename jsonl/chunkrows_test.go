package jsonl_test

import (
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// deltas returns n text-delta chunk events of turn 1 step 1 from seq.
func deltas(t *testing.T, seq int64, n int) []session.Event {
	t.Helper()
	var out []session.Event
	for i := range n {
		e, err := session.NewEvent(wire.TypeAssistantChunk, seq+int64(i), 2000+int64(i),
			json.RawMessage(`{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"part`+itoa(i)+`"}}`))
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// storeFor opens a store of the given format over a fresh root.
func storeFor(t *testing.T, comp jsonl.Compression, format jsonl.Format) (*jsonl.Store, string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: comp, Format: format, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return st, root
}

// Chunk deltas are stored as the harness's packed rows in both formats and
// read back as the events that were appended; a v0 log keeps the
// harness's replace spelling, and its migration to v3 respells it.
func TestChunkDeltasArePackedAndReadBack(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		for _, format := range []jsonl.Format{jsonl.FormatV0, jsonl.FormatV3} {
			t.Run(string(format), func(t *testing.T) {
				st, _ := storeFor(t, comp, format)
				version := wire.FormatVersion
				if format == jsonl.FormatV0 {
					version = wire.FormatVersionV0
				}
				h, err := st.Create(bg, wire.Header{Version: version, ID: "s", CreatedAt: 5, Cwd: "/w"}, jsonl.CreateOptions{HandleID: newHandleID()})
				require.NoError(t, err)
				batch := append([]session.Event{turnStart(t, 0, 1), userMessage(t, 1, "hi")}, deltas(t, 2, 5)...)
				require.NoError(t, h.Append(bg, batch))
				replace := userMessage(t, 7, "summary")
				replace.SurfaceOp = &session.SurfaceOp{Op: session.SurfaceReplace, StartSeq: 1, EndSeq: 1}
				replace.SourceEventSeqs = []int64{1}
				require.NoError(t, h.Append(bg, []session.Event{replace}))
				require.NoError(t, h.Close(bg))

				ins, err := st.Inspect(bg, "s")
				require.NoError(t, err)
				raw := logText(t, comp, readFile(t, ins.Path))
				require.Contains(t, raw, `{"type":"text-chunks","seq0":2,"time0":2000,"data":{"turn":1,"step":1,"index":0,"dt":[1,1,1,1],"texts":["part0","part1","part2","part3","part4"]}}`)
				require.NotContains(t, raw, `"type":"assistant/chunk"`)
				if format == jsonl.FormatV0 {
					require.Contains(t, raw, `"surfaceOp":{"op":"replace","start":1,"end":1}`)
				} else {
					require.Contains(t, raw, `"surfaceOp":{"op":"replace","startSeq":1,"endSeq":1}`)
				}

				want := append(batch, replace)
				got := readAll(t, st, "s")
				require.Len(t, got, len(want))
				for i := range want {
					a, _ := want[i].MarshalJSON()
					b, _ := got[i].MarshalJSON()
					if i == 7 {
						// The spelling is the log's; the range is the same.
						require.Equal(t, want[i].SurfaceOp.StartSeq, got[i].SurfaceOp.StartSeq)
						require.Equal(t, want[i].SurfaceOp.EndSeq, got[i].SurfaceOp.EndSeq)
						continue
					}
					require.Equal(t, string(a), string(b), "seq %d", i)
				}

				if format != jsonl.FormatV0 {
					return
				}
				res, err := st.Migrate(bg, "s", jsonl.MigrateOptions{})
				require.NoError(t, err)
				require.Equal(t, 3, res.ToVersion)
				migrated := readAll(t, st, "s")
				require.Len(t, migrated, len(want))
				require.Equal(t, session.SpellingV3, migrated[7].SurfaceOp.Spelling)
				require.Equal(t, int64(1), migrated[7].SurfaceOp.StartSeq)
				for i := range 7 {
					a, _ := got[i].MarshalJSON()
					b, _ := migrated[i].MarshalJSON()
					require.Equal(t, string(a), string(b))
				}
			})
		}
	})
}

// A v0 log holding a type only sessionflow's v3 format knows, or a replace
// spelled the v3 way, is refused, as the harness refuses it; so is an
// append that would make one.
func TestV0LogHoldsOnlyTheHarnessVocabulary(t *testing.T) {
	st, root := storeFor(t, jsonl.CompressionNone, jsonl.FormatV0)
	hdr := `{"type":"session","version":0,"id":"%s","createdAt":5,"delegationDepth":0}` + "\n"
	writeLogFile(t, root, "sys", "session.jsonl", strings.Replace(hdr, "%s", "sys", 1)+
		`{"type":"system/message","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{}},"surfaceOp":"append"}`+"\n")
	_, err := st.Inspect(bg, "sys")
	require.ErrorIs(t, err, wire.ErrFormatUnsupported)
	require.ErrorContains(t, err, `contains event type "system/message" (seq 0) unknown to this harness and not marked ignorable`)

	writeLogFile(t, root, "v3op", "session.jsonl", strings.Replace(hdr, "%s", "v3op", 1)+
		`{"type":"user/message","seq":0,"time":1,"data":{"id":"a","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`+"\n"+
		`{"type":"user/message","seq":1,"time":1,"data":{"id":"b","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":{"op":"replace","startSeq":0,"endSeq":0},"sourceEventSeqs":[0]}`+"\n")
	_, err = st.Inspect(bg, "v3op")
	require.ErrorIs(t, err, wire.ErrCorrupt)
	require.ErrorContains(t, err, `event at seq 1: a v0 log spells a replace surfaceOp {op:"replace", start, end}`)

	h, err := st.Create(bg, wire.Header{Version: wire.FormatVersionV0, ID: "w", CreatedAt: 5}, jsonl.CreateOptions{HandleID: newHandleID()})
	require.NoError(t, err)
	sys, err := session.NewEvent(wire.TypeSystemMessage, 0, 1, json.RawMessage(`{"turn":1,"step":1,"message":{}}`))
	require.NoError(t, err)
	sys.SurfaceOp = session.AppendOp()
	err = h.Append(bg, []session.Event{sys})
	require.ErrorIs(t, err, wire.ErrInvalidArgument)
	require.ErrorContains(t, err, `event type "system/message" is not one the published harness knows and not marked ignorable; the harness would refuse this v0 log`)

	// A message the harness's load would refuse, and a replacement its fold
	// would refuse, are refused; the log stays as it was.
	noID, err := session.NewEvent(wire.TypeUserMessage, 0, 1, json.RawMessage(`{"role":"user","content":[],"source":{"kind":"user"}}`))
	require.NoError(t, err)
	noID.SurfaceOp = session.AppendOp()
	err = h.Append(bg, []session.Event{noID})
	require.ErrorIs(t, err, wire.ErrInvalidArgument)
	require.ErrorContains(t, err, `the harness would refuse this v0 log`)
	require.NoError(t, h.Append(bg, []session.Event{userMessage(t, 0, "a")}))
	uncited := userMessage(t, 1, "b")
	uncited.SurfaceOp = &session.SurfaceOp{Op: session.SurfaceReplace, StartSeq: 0, EndSeq: 0}
	err = h.Append(bg, []session.Event{uncited})
	require.ErrorIs(t, err, wire.ErrInvalidArgument)
	require.ErrorContains(t, err, `the harness would refuse this v0 log`)
	uncited.SourceEventSeqs = []int64{0}
	require.NoError(t, h.Append(bg, []session.Event{uncited}))
	require.Equal(t, int64(2), h.NextSeq())
	require.NoError(t, h.Close(bg))
}

// A header whose version is -0 is not lossless JSON: refused as corrupt,
// not read as the v0 it equals in JavaScript nor refused as an old version.
func TestHeaderVersionNegativeZeroIsNotLossless(t *testing.T) {
	st, root := storeFor(t, jsonl.CompressionNone, jsonl.FormatV0)
	writeLogFile(t, root, "nz", "session.jsonl", `{"type":"session","version":-0,"id":"nz","createdAt":5,"delegationDepth":0}`+"\n")
	_, err := st.Inspect(bg, "nz")
	require.ErrorIs(t, err, wire.ErrCorrupt)
	require.ErrorContains(t, err, "corrupt session log: header: not losslessly JSON-serializable: negative zero -0")
}
