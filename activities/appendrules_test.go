package activities_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// genEvent builds an event from raw JSON data; surface events get
// surfaceOp append.
func genEvent(typ string, seq int64, data string) session.Event {
	e := session.Event{Type: typ, Seq: seq, Time: 1000 + seq, Data: json.RawMessage(data)}
	if session.SurfaceEligible(typ) {
		e.SurfaceOp = session.AppendOp()
	}
	return e
}

// genSession generates a valid random log: whole and unfinished turns with
// steps, tool calls (recorded or not, answered or not), user messages,
// ignorable custom events and end-seed markers. A seeded session starts with
// an inherited prefix closed by its {inherited:true} marker.
func genSession(r *rand.Rand, seeded bool) []session.Event {
	var out []session.Event
	add := func(typ, data string) {
		out = append(out, genEvent(typ, int64(len(out)), data))
	}
	turn := int64(0)
	turns := func(n int) {
		for range n {
			turn++
			add(wire.TypeTurnStart, fmt.Sprintf(`{"turn":%d}`, turn))
			add(wire.TypeUserMessage, fmt.Sprintf(`{"id":"u-%d","role":"user","content":[{"type":"text","text":"q"}],"source":{"kind":"user"}}`, len(out)))
			for step := int64(1); step <= int64(r.Intn(3)); step++ {
				add(wire.TypeStepStart, fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
				calls := r.Intn(3)
				blocks := []string{`{"type":"text","text":"a"}`}
				for c := range calls {
					blocks = append(blocks, fmt.Sprintf(`{"type":"tool-call","id":"c%d-%d-%d","name":"read","arguments":{}}`, turn, step, c))
				}
				add(wire.TypeAssistantMessage, fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"role":"assistant","content":[%s]},"stream":[]}`, turn, step, strings.Join(blocks, ",")))
				for c := range calls {
					id := fmt.Sprintf("c%d-%d-%d", turn, step, c)
					if r.Intn(4) > 0 {
						add(wire.TypeToolCall, fmt.Sprintf(`{"turn":%d,"step":%d,"callId":%q,"name":"read","arguments":"{}"}`, turn, step, id))
					}
					if r.Intn(3) > 0 {
						add(wire.TypeToolResult, fmt.Sprintf(`{"turn":%d,"step":%d,"message":{"id":"r-%s","role":"user","source":{"kind":"tool","callId":%q},"content":[{"type":"tool-result","toolCallId":%q,"isError":false,"content":[{"type":"text","text":"ok"}]}]}}`, turn, step, id, id, id))
					}
				}
				if r.Intn(5) > 0 {
					add(wire.TypeStepEnd, fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
				}
			}
			if r.Intn(4) == 0 {
				e := genEvent("custom/note", int64(len(out)), `{"n":1}`)
				e.Ignorable = true
				out = append(out, e)
			}
			if r.Intn(3) > 0 {
				add(wire.TypeTurnEnd, fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn))
				if r.Intn(4) == 0 {
					add(wire.TypeEndSeed, `{}`)
				}
			}
		}
	}
	if seeded {
		turns(1 + r.Intn(2))
		add(wire.TypeEndSeed, `{"inherited":true}`)
	}
	turns(r.Intn(4))
	return out
}

// mutation breaks one event of a batch in a way a later operation may
// trip over; breaks reports whether that way always breaks read, repair or
// resume (and so must be refused) when it applies.
type mutation struct {
	name   string
	breaks bool
	apply  func(e *session.Event) bool
}

func replaceData(e *session.Event, typ, data string) bool {
	if e.Type != typ {
		return false
	}
	e.Data = json.RawMessage(data)
	return true
}

var mutations = []mutation{
	{"turn/start without turn", true, func(e *session.Event) bool { return replaceData(e, wire.TypeTurnStart, `{}`) }},
	{"turn/start turn as a string", true, func(e *session.Event) bool { return replaceData(e, wire.TypeTurnStart, `{"turn":"1"}`) }},
	{"turn/start turn 0", true, func(e *session.Event) bool { return replaceData(e, wire.TypeTurnStart, `{"turn":0}`) }},
	{"step/start step 0", true, func(e *session.Event) bool { return replaceData(e, wire.TypeStepStart, `{"turn":1,"step":0}`) }},
	{"tool-call block without id", true, func(e *session.Event) bool {
		return replaceData(e, wire.TypeAssistantMessage, `{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","name":"x","arguments":{}}]},"stream":[]}`)
	}},
	{"assistant/message without content", true, func(e *session.Event) bool {
		return replaceData(e, wire.TypeAssistantMessage, `{"turn":1,"step":1,"message":{"role":"assistant"},"stream":[]}`)
	}},
	{"tool/call data not an object", true, func(e *session.Event) bool {
		return replaceData(e, wire.TypeToolCall, `["read"]`)
	}},
	{"tool/result without callId", true, func(e *session.Event) bool {
		return replaceData(e, wire.TypeToolResult, `{"turn":1,"step":1,"message":{"id":"r","role":"user","source":{"kind":"tool"},"content":[]}}`)
	}},
	{"end-seed inherited as a string", true, func(e *session.Event) bool {
		return replaceData(e, wire.TypeEndSeed, `{"inherited":"yes"}`)
	}},
	{"end-seed inherited dropped", false, func(e *session.Event) bool { return replaceData(e, wire.TypeEndSeed, `{}`) }},
	{"end-seed inherited added", false, func(e *session.Event) bool {
		return replaceData(e, wire.TypeEndSeed, `{"inherited":true}`)
	}},
	{"user message turned into an inherited end-seed", false, func(e *session.Event) bool {
		if e.Type != wire.TypeUserMessage {
			return false
		}
		*e = genEvent(wire.TypeEndSeed, e.Seq, `{"inherited":true}`)
		return true
	}},
	{"ignorable custom event no longer ignorable", true, func(e *session.Event) bool {
		if e.Type != "custom/note" {
			return false
		}
		e.Ignorable = false
		return true
	}},
	{"user message retyped custom/x", true, func(e *session.Event) bool {
		if e.Type != wire.TypeUserMessage {
			return false
		}
		*e = genEvent("custom/x", e.Seq, `{}`)
		return true
	}},
	{"turn/end turn 0", false, func(e *session.Event) bool {
		return replaceData(e, wire.TypeTurnEnd, `{"turn":0,"reason":{"kind":"completed"}}`)
	}},
}

// TestAppendAcceptsOnlyWhatReadRepairAndResumeAccept offers random batches,
// valid ones and subtly broken mutations of them, to Append through the
// AppendBatch activity. Whatever is accepted must read back, yield the
// repair batch `log repair` computes, and resume through the production
// activities (OpenHandle, ScanLog, Repair); whatever is refused
// is refused as non-retryable InvalidArgument and leaves the log as it was.
func TestAppendAcceptsOnlyWhatReadRepairAndResumeAccept(t *testing.T) {
	ctx := context.Background()
	r := rand.New(rand.NewSource(20261201))
	roots := map[jsonl.Compression]*activities.Activities{}
	for _, comp := range []jsonl.Compression{jsonl.CompressionNone, jsonl.CompressionZstd} {
		st, err := jsonl.NewStore(jsonl.Options{Root: memTempDir(t), Compression: comp})
		require.NoError(t, err)
		roots[comp] = &activities.Activities{Runtime: &activities.Runtime{Store: st}, ReadChunk: 7}
	}
	const cases = 300
	accepted, refused, mustRefuse := 0, 0, 0
	for i := range cases {
		comp := jsonl.CompressionNone
		if i%2 == 1 {
			comp = jsonl.CompressionZstd
		}
		a := roots[comp]
		id := fmt.Sprintf("p%d", i)
		seeded := r.Intn(4) == 0
		events := genSession(r, seeded)
		hdr := wire.Header{ID: id, CreatedAt: 1, IsSeeded: seeded}
		inherited := int64(0)
		if seeded {
			hdr.ParentSession = "parent"
			for _, e := range events {
				if tagged, _ := e.IsInheritedMarker(); tagged {
					inherited = e.Seq
					break
				}
			}
		}
		// Split into batches; maybe mutate one event of one batch.
		var batches [][]session.Event
		for rest := events; len(rest) > 0; {
			n := 1 + r.Intn(min(len(rest), 6))
			batches = append(batches, session.CloneEvents(rest[:n]))
			rest = rest[n:]
		}
		what, want := "", false
		if len(batches) > 0 && r.Intn(3) > 0 {
			b := batches[r.Intn(len(batches))]
			k := r.Intn(len(b))
			for _, m := range r.Perm(len(mutations)) {
				if mutations[m].apply(&b[k]) {
					what, want = mutations[m].name, mutations[m].breaks
					break
				}
			}
		}
		info, err := a.CreateHandle(ctx, activities.CreateHandleInput{Header: hdr, HandleID: "h-" + id, InheritedEventCount: inherited})
		require.NoError(t, err, id)
		var kept []session.Event
		wasRefused := false
		for _, b := range batches {
			before := logBytes(t, a.Runtime.Store, id)
			_, err := a.AppendBatch(ctx, activities.AppendBatchInput{Ref: info.Ref, Events: b})
			if err != nil {
				typ, nonRetryable := appType(t, err)
				require.Equal(t, "InvalidArgument", typ, "%s (%s): %v", id, what, err)
				require.True(t, nonRetryable)
				require.Contains(t, err.Error(), "invalid session event at index ")
				require.Equal(t, before, logBytes(t, a.Runtime.Store, id), "a refused batch writes nothing")
				wasRefused = true
				break
			}
			kept = append(kept, b...)
		}
		require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: info.Ref}))
		if wasRefused {
			refused++
		} else {
			accepted++
		}
		if want {
			mustRefuse++
			require.True(t, wasRefused, "%s: a batch with %q was accepted", id, what)
		}
		if len(kept) == 0 {
			continue
		}
		// Read.
		rh, err := a.Runtime.Store.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
		require.NoError(t, err, "%s (%s): read", id, what)
		got, err := rh.Read(ctx, 0, -1)
		require.NoError(t, err)
		require.NoError(t, rh.Close(ctx))
		require.Len(t, got, len(kept))
		// Repair, as `log repair` computes it: closers plus marker, a batch
		// Append itself accepts.
		closers, err := session.InterruptedTurnClosers(got)
		require.NoError(t, err, "%s (%s): repair", id, what)
		all := append(got[:len(got):len(got)], closers...)
		repairBatch := closers
		if m, due := session.EndSeedMarker(all, false, session.EndSeedTime(all, 5)); due {
			repairBatch = append(repairBatch, m)
		}
		require.NoError(t, session.CheckAppendable(hdr, int64(len(got)), repairBatch), "%s (%s): repair batch", id, what)
		// Resume, through the production activities.
		oh, err := a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: id, Access: jsonl.AccessWrite, HandleID: "r-" + id})
		require.NoError(t, err, "%s (%s): resume open", id, what)
		_, err = a.ScanLog(ctx, activities.HandleInput{Ref: oh.Ref})
		require.NoError(t, err, "%s (%s): resume summary", id, what)
		rep, err := a.Repair(ctx, activities.RepairInput{Ref: oh.Ref, Now: 5})
		require.NoError(t, err, "%s (%s): resume repair", id, what)
		require.Nil(t, rep.Scan.OpenTurn)
		require.True(t, rep.Scan.EndsWithMarker)
		require.NoError(t, a.CloseHandle(ctx, activities.HandleInput{Ref: oh.Ref}))
	}
	t.Logf("%d cases: %d accepted, %d refused (%d had to be)", cases, accepted, refused, mustRefuse)
	require.Greater(t, accepted, cases/4)
	require.Greater(t, mustRefuse, cases/8)
}

// logBytes returns the session's log file content, or nil when it has none.
func logBytes(t *testing.T, st *jsonl.Store, id string) []byte {
	t.Helper()
	in, err := st.Inspect(context.Background(), id)
	require.NoError(t, err)
	if in.Pending {
		return nil
	}
	b, err := os.ReadFile(in.Path)
	require.NoError(t, err)
	return b
}

// TestResumeRefusesMidTailDamageWithoutTouchingTheLog: a raw log whose
// damage after the last turn/end is followed by complete valid records is
// corrupt, not torn. The resume path fails typed and non-retryable at its
// write open and leaves every byte in place; nothing is quarantined.
func TestResumeRefusesMidTailDamageWithoutTouchingTheLog(t *testing.T) {
	ctx := context.Background()
	st, err := jsonl.NewStore(jsonl.Options{Root: t.TempDir(), Compression: jsonl.CompressionNone})
	require.NoError(t, err)
	a := &activities.Activities{Runtime: &activities.Runtime{Store: st}}
	seedSession(t, a, "mid", []session.Event{
		ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1}),
		ev(t, wire.TypeTurnEnd, 1, map[string]any{"turn": 1, "reason": map[string]any{"kind": "completed"}}),
		ev(t, wire.TypeTurnStart, 2, map[string]any{"turn": 2}),
		ev(t, wire.TypeStepStart, 3, map[string]any{"turn": 2, "step": 1}),
	})
	in, err := st.Inspect(ctx, "mid")
	require.NoError(t, err)
	raw, err := os.ReadFile(in.Path)
	require.NoError(t, err)
	lines := strings.SplitAfter(string(raw), "\n")
	// An extra envelope field on turn/start@2, in the middle of the tail.
	lines[3] = strings.Replace(lines[3], `"type":"turn/start"`, `"type":"turn/start","extra":1`, 1)
	damaged := []byte(strings.Join(lines, ""))
	require.NoError(t, os.WriteFile(in.Path, damaged, 0o600))
	dirBefore := dirNames(t, filepath.Dir(in.Path))
	offset := len(lines[0]) + len(lines[1]) + len(lines[2])

	_, err = a.OpenHandle(ctx, activities.OpenHandleInput{SessionID: "mid", Access: jsonl.AccessWrite, HandleID: "resume"})
	typ, nonRetryable := appType(t, err)
	require.Equal(t, "SessionCorrupt", typ)
	require.True(t, nonRetryable)
	require.Contains(t, err.Error(), fmt.Sprintf("the damage at byte %d is followed by a complete valid record at line 4 (byte %d), so it is not a torn write", offset, offset+len(lines[3])))
	after, err := os.ReadFile(in.Path)
	require.NoError(t, err)
	require.Equal(t, damaged, after, "the log is not modified")
	require.Equal(t, dirBefore, dirNames(t, filepath.Dir(in.Path)), "no lease, no quarantine is left behind")
	lease, err := st.LeaseOf(ctx, "mid")
	require.NoError(t, err)
	require.Nil(t, lease)
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// memTempDir is a temporary directory on a memory filesystem when the
// machine has one (the property test's hundreds of fsyncs then cost
// nothing), else t.TempDir().
func memTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/dev/shm", "sessionflow-test-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
