package jsonl_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/jsonl/faultfs"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// TestUpdateReadsTailAndAppends: fn sees the events from `from` to the end
// and the next seq; what it returns is appended and the new next seq is
// returned; nil appends nothing.
func TestUpdateReadsTailAndAppends(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		hd := create(t, e.store, header("upd", "/w"))
		require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1), userMessage(t, 1, "hi"), stepStart(t, 2, 1, 1)}))

		next, err := hd.Update(bg, 1, func(tail []session.Event, next int64) ([]session.Event, error) {
			require.Equal(t, []int64{1, 2}, seqs(tail))
			require.Equal(t, int64(3), next)
			return []session.Event{assistantMessage(t, next, 1, 1, "hello")}, nil
		})
		require.NoError(t, err)
		require.Equal(t, int64(4), next)

		next, err = hd.Update(bg, 4, func(tail []session.Event, next int64) ([]session.Event, error) {
			require.Empty(t, tail)
			require.Equal(t, int64(4), next)
			return nil, nil
		})
		require.NoError(t, err)
		require.Equal(t, int64(4), next)

		// What the handle serves afterwards is what another store reads.
		want := lines(t, readAll(t, e.newStore(nil), "upd")...)
		require.Len(t, want, 4)
		require.Equal(t, want, lines(t, readHandle(t, hd)...))
		next, err = hd.Update(bg, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
			require.Equal(t, want, lines(t, tail...))
			return nil, nil
		})
		require.NoError(t, err)
		require.Equal(t, int64(4), next)
	})
}

// TestUpdateMaterializes: an Update on a created session without a log
// sees no events and publishes the log with its batch.
func TestUpdateMaterializes(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	hd := create(t, e.store, header("fresh", ""))
	next, err := hd.Update(bg, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
		require.Empty(t, tail)
		require.Equal(t, int64(0), next)
		return []session.Event{turnStart(t, 0, 1)}, nil
	})
	require.NoError(t, err)
	require.Equal(t, int64(1), next)
	require.Equal(t, []int64{0}, seqs(readAll(t, e.newStore(nil), "fresh")))
}

// TestUpdateRefusals: a misnumbered or unacceptable batch, an fn error, an
// offset past the end and a read handle are refused and the log is
// unchanged.
func TestUpdateRefusals(t *testing.T) {
	e := newEnv(t, jsonl.CompressionNone, nil)
	hd := create(t, e.store, header("ref", ""))
	require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1)}))
	before := readFile(t, e.logPath("", "ref"))

	_, err := hd.Update(bg, 0, func(_ []session.Event, next int64) ([]session.Event, error) {
		return []session.Event{stepStart(t, next+1, 1, 1)}, nil
	})
	requireCode(t, err, wire.ErrSeqMismatch)

	_, err = hd.Update(bg, 0, func(_ []session.Event, next int64) ([]session.Event, error) {
		return []session.Event{ev(t, "no/such-type", next, `{}`)}, nil
	})
	requireCode(t, err, wire.ErrInvalidArgument)
	require.ErrorContains(t, err, `event type "no/such-type" is unknown to this build`)

	boom := errors.New("fn says no")
	_, err = hd.Update(bg, 0, func([]session.Event, int64) ([]session.Event, error) { return nil, boom })
	require.ErrorIs(t, err, boom)

	_, err = hd.Update(bg, 2, func([]session.Event, int64) ([]session.Event, error) {
		t.Fatal("fn must not run for an offset past the end")
		return nil, nil
	})
	requireCode(t, err, wire.ErrInvalidArgument)
	require.ErrorContains(t, err, "update offset 2 lies beyond the end of the log (next seq 1)")

	rd, err := e.store.Open(bg, "ref", jsonl.AccessRead, jsonl.OpenOptions{})
	require.NoError(t, err)
	_, err = rd.Update(bg, 0, func([]session.Event, int64) ([]session.Event, error) { return nil, nil })
	requireCode(t, err, wire.ErrReadOnly)

	require.Equal(t, string(before), string(readFile(t, e.logPath("", "ref"))))
	require.Equal(t, int64(1), hd.NextSeq())
}

// TestUpdateRollsBackFailedWrite: a failed fsync cuts the file back and the
// next Update sees the log without the lost batch.
func TestUpdateRollsBackFailedWrite(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		ffs := faultfs.New(nil)
		e := newEnv(t, comp, ffs)
		hd := create(t, e.store, header("rb", ""))
		require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1)}))
		before := readFile(t, e.logPath("", "rb"))
		ffs.Add(faultfs.Rule{Index: -1, Op: faultfs.OpSync, PathContains: "session.v3", Err: syscall.EIO, Times: 1})
		_, err := hd.Update(bg, 0, func(_ []session.Event, next int64) ([]session.Event, error) {
			return []session.Event{stepStart(t, next, 1, 1)}, nil
		})
		require.ErrorIs(t, err, syscall.EIO)
		require.Equal(t, before, readFile(t, e.logPath("", "rb")))
		next, err := hd.Update(bg, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
			require.Equal(t, []int64{0}, seqs(tail))
			return []session.Event{stepStart(t, next, 1, 1)}, nil
		})
		require.NoError(t, err)
		require.Equal(t, int64(2), next)
		require.Equal(t, []int64{0, 1}, seqs(readAll(t, e.newStore(nil), "rb")))
	})
}

// TestUpdateAcrossProcesses: two stores over one root attached to the same
// write handle (a retried activity on another worker) each see what the
// other appended, and concurrent read-decide-append Updates from both never
// lose or duplicate a decision.
func TestUpdateAcrossProcesses(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		hd := create(t, e.store, header("xp", ""))
		require.NoError(t, hd.Append(bg, []session.Event{turnStart(t, 0, 1)}))
		other := e.newStore(nil)
		ho := other.Attach(hd.Ref())
		next, err := ho.Update(bg, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
			require.Equal(t, []int64{0}, seqs(tail))
			return []session.Event{userMessage(t, next, "from the other process")}, nil
		})
		require.NoError(t, err)
		require.Equal(t, int64(2), next)
		_, err = hd.Update(bg, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
			require.Equal(t, []int64{0, 1}, seqs(tail), "the first store must see the other's append")
			require.Equal(t, int64(2), next)
			return nil, nil
		})
		require.NoError(t, err)

		// Each worker adds the user message "m<i>" unless the log holds it.
		const n = 12
		handles := []*jsonl.Handle{hd, ho, e.store.Attach(hd.Ref()), other.Attach(hd.Ref())}
		var wg sync.WaitGroup
		errs := make(chan error, 2*n)
		for round := 0; round < 2; round++ {
			for i := range n {
				wg.Add(1)
				go func(h *jsonl.Handle, text string) {
					defer wg.Done()
					_, err := h.Update(bg, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
						for _, ev := range tail {
							if ev.Type == wire.TypeUserMessage && messageID(ev) == text {
								return nil, nil
							}
						}
						e, err := session.NewEvent(wire.TypeUserMessage, next, evTime(next), json.RawMessage(fmt.Sprintf(`{"id":"%s","role":"user","content":[{"type":"text","text":"%s"}],"source":{"kind":"user"}}`, text, text)))
						if err != nil {
							return nil, err
						}
						e.SurfaceOp = session.AppendOp()
						return []session.Event{e}, nil
					})
					errs <- err
				}(handles[(i+round)%len(handles)], fmt.Sprintf("m%d", i))
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		got := readAll(t, e.newStore(nil), "xp")
		require.Equal(t, upTo(2+n), seqs(got))
		seen := map[string]int{}
		for _, ev := range got[2:] {
			require.Equal(t, wire.TypeUserMessage, ev.Type)
			seen[messageID(ev)]++
		}
		require.Len(t, seen, n)
		for id, c := range seen {
			require.Equal(t, 1, c, "message %s stored %d times", id, c)
		}
	})
}

// messageID is the id of a user/message event's message.
func messageID(e session.Event) string {
	var m struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(e.Data, &m)
	return m.ID
}

// TestUpdateAfterTornTail: an Update whose write first cuts a torn tail
// keeps serving exactly what the file holds afterwards.
func TestUpdateAfterTornTail(t *testing.T) {
	eachCompression(t, func(t *testing.T, comp jsonl.Compression) {
		e := newEnv(t, comp, nil)
		path := e.writeLog(header("torn", "/w"), lines(t, completedTurn(t, 0, 1)...))
		appendFile(t, path, tornTail(t, comp, `{"type":"turn/start","seq":6,"ti`, turnStart(t, 6, 2)))
		hd := openWrite(t, e.store, "torn")
		next, err := hd.Update(bg, 4, func(tail []session.Event, next int64) ([]session.Event, error) {
			require.Equal(t, []int64{4, 5}, seqs(tail))
			return []session.Event{turnStart(t, next, 2)}, nil
		})
		require.NoError(t, err)
		require.Equal(t, int64(7), next)
		want := lines(t, readAll(t, e.newStore(nil), "torn")...)
		require.Len(t, want, 7)
		_, err = hd.Update(bg, 0, func(tail []session.Event, _ int64) ([]session.Event, error) {
			require.Equal(t, want, lines(t, tail...))
			return nil, nil
		})
		require.NoError(t, err)
	})
}
