package activities_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
	sdktest "go.temporal.io/sdk/testsuite"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// openToolTurn is a log whose last turn is open with a recorded tool call
// and no result: its repair is a tool/result, a step/end, a turn/end and
// the session/end-seed marker.
func openToolTurn(t *testing.T) []session.Event {
	t.Helper()
	type obj = map[string]any
	return []session.Event{
		ev(t, wire.TypeTurnStart, 0, obj{"turn": 1}),
		ev(t, wire.TypeUserMessage, 1, obj{"turn": 1, "message": obj{"role": "user", "content": []any{obj{"type": "text", "text": "Read /etc/hosts."}}}}),
		ev(t, wire.TypeStepStart, 2, obj{"turn": 1, "step": 1}),
		ev(t, wire.TypeAssistantMessage, 3, obj{"turn": 1, "step": 1, "stream": []any{}, "message": obj{"role": "assistant", "content": []any{
			obj{"type": "tool-call", "id": "call-1", "name": "read", "arguments": obj{"path": "/etc/hosts"}},
		}}}),
		ev(t, wire.TypeToolCall, 4, obj{"turn": 1, "step": 1, "callId": "call-1", "name": "read", "arguments": `{"path":"/etc/hosts"}`}),
	}
}

// countZstdFrames walks data as a sequence of whole Zstandard frames (RFC
// 8878 section 3.1.1) and returns how many there are; anything else fails
// the test.
func countZstdFrames(t *testing.T, data []byte) int {
	t.Helper()
	n := 0
	for pos := 0; pos < len(data); n++ {
		require.GreaterOrEqual(t, len(data)-pos, 6, "frame %d is cut short", n)
		require.Equal(t, uint32(0xFD2FB528), binary.LittleEndian.Uint32(data[pos:]), "frame %d: magic number", n)
		fhd := data[pos+4]
		pos += 5
		single := fhd&0x20 != 0
		if !single {
			pos++ // window descriptor
		}
		pos += []int{0, 1, 2, 4}[fhd&3] // dictionary id
		fcs := []int{0, 2, 4, 8}[fhd>>6]
		if fcs == 0 && single {
			fcs = 1
		}
		pos += fcs
		for {
			require.LessOrEqual(t, pos+3, len(data), "frame %d: block header cut short", n)
			bh := uint32(data[pos]) | uint32(data[pos+1])<<8 | uint32(data[pos+2])<<16
			pos += 3
			size := int(bh >> 3)
			if (bh>>1)&3 == 1 { // RLE: one byte repeated
				size = 1
			}
			pos += size
			if bh&1 == 1 {
				break
			}
		}
		if fhd&0x04 != 0 {
			pos += 4 // content checksum
		}
		require.LessOrEqual(t, pos, len(data), "frame %d overruns the data", n)
	}
	return n
}

// TestRepairStoresOneBatch runs the resume's repair activity, as the
// resume workflow schedules it, over a store whose filesystem records every
// operation, and pins FORMAT.md §5.5: the closers and the end-seed marker are
// stored as one batch — one Zstandard frame (raw: one write) and one log
// fsync; with a torn tail, the cut adds exactly one more fsync.
func TestRepairStoresOneBatch(t *testing.T) {
	for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
		for _, torn := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/torn=%v", comp, torn), func(t *testing.T) {
				ctx := context.Background()
				fsys := faultfs.New(nil)
				root := t.TempDir()
				st, err := jsonl.NewStore(jsonl.Options{Root: root, Compression: comp, FS: fsys})
				require.NoError(t, err)
				a := &activities.Activities{Runtime: &activities.Runtime{Store: st}}
				stored := openToolTurn(t)
				seedSession(t, a, "rm", stored)
				snap, err := st.Stat(ctx, "rm")
				require.NoError(t, err)
				path := snap.Path
				committed, err := os.ReadFile(path)
				require.NoError(t, err)
				if torn {
					tail := []byte(`{"type":"step/end","seq":5,"ti`)
					if comp == jsonl.CompressionZstd {
						// A frame whose blocks never arrived.
						enc, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
						require.NoError(t, err)
						tail = enc.EncodeAll(tail, nil)[:8]
						require.NoError(t, enc.Close())
					}
					f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
					require.NoError(t, err)
					_, err = f.Write(tail)
					require.NoError(t, err)
					require.NoError(t, f.Close())
				}

				info, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "rm", Access: jsonl.AccessWrite, HandleID: "resume"})
				require.NoError(t, err)
				fsys.Reset()
				var suite sdktest.WorkflowTestSuite
				env := suite.NewTestActivityEnvironment()
				env.RegisterActivity(a)
				v, err := env.ExecuteActivity(a.Repair, activities.RepairInput{Ref: info.Ref, Now: 50_000})
				require.NoError(t, err)
				var res activities.RepairResult
				require.NoError(t, v.Get(&res))
				require.Equal(t, 3, res.Closers)
				require.Equal(t, int64(8), res.MarkerSeq)
				require.Equal(t, 4, res.Appended)

				// Only the log's own fsyncs and writes count: keeping what a
				// cut removes elsewhere is not part of the batch.
				logSyncs, logWrites := 0, 0
				for _, r := range fsys.Records() {
					switch {
					case r.Op == faultfs.OpSync && r.Path == path:
						logSyncs++
					case r.Op == faultfs.OpWrite && r.Path == path:
						logWrites++
					}
				}
				wantSyncs := 1
				if torn {
					wantSyncs++ // the cut
				}
				require.Equal(t, wantSyncs, logSyncs, "one fsync of the log for the batch (and one for the cut)\n%s", fsys)
				require.Equal(t, 1, logWrites, "one write of the batch\n%s", fsys)

				after, err := os.ReadFile(path)
				require.NoError(t, err)
				require.True(t, bytes.HasPrefix(after, committed), "the committed log is the head of the repaired one")
				added := after[len(committed):]
				plain := added
				if comp == jsonl.CompressionZstd {
					require.Equal(t, 1, countZstdFrames(t, added), "closers and marker are one frame")
					dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
					require.NoError(t, err)
					defer dec.Close()
					plain, err = dec.DecodeAll(added, nil)
					require.NoError(t, err)
				}
				var types []string
				for _, l := range bytes.SplitAfter(plain, []byte("\n")) {
					if len(l) == 0 {
						continue
					}
					var e session.Event
					require.NoError(t, e.UnmarshalJSON(bytes.TrimSuffix(l, []byte("\n"))))
					types = append(types, e.Type)
				}
				require.Equal(t, []string{"tool/result", "step/end", "turn/end", "session/end-seed"}, types)
				require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
			})
		}
	}
}
