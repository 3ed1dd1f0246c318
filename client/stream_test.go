package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// testEvents builds n valid events from seq first whose data carries pad
// bytes of padding, so that sizes vary with pad.
func testEvents(t *testing.T, first int64, n, pad int) []session.Event {
	t.Helper()
	out := make([]session.Event, 0, n)
	for i := 0; i < n; i++ {
		seq := first + int64(i)
		e, err := session.NewEvent(wire.TypeTurnStart, seq, 1700000000000+seq,
			map[string]any{"turn": seq + 1, "pad": strings.Repeat("x", pad+int(seq%7)*13)})
		require.NoError(t, err)
		out = append(out, e)
	}
	return out
}

// toJSONL encodes events one per line.
func toJSONL(t *testing.T, events []session.Event) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		line, err := e.MarshalJSON()
		require.NoError(t, err)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// encodedSize is the size the Append validator counts for a batch.
func encodedSize(t *testing.T, events []session.Event) int {
	t.Helper()
	n := 0
	for _, e := range events {
		b, err := e.MarshalJSON()
		require.NoError(t, err)
		n += len(b) + 1
	}
	return n
}

// recordingAppender stores every batch, checks that batches are awaited in
// the order they were submitted, and can fail one batch.
type recordingAppender struct {
	mu          sync.Mutex
	batches     [][]session.Event
	next        int64 // stored cursor
	waited      int   // batches awaited so far
	inflight    int
	maxInflight int
	failBatch   int   // 1-based index of a batch whose store fails; 0 = none
	failErr     error // its error
	rejectFrom  int   // 1-based index from which submits fail; 0 = none
}

func (a *recordingAppender) submit(_ context.Context, sent []wire.Event) (appendWait, error) {
	events, err := session.FromWireEvents(sent)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	idx := len(a.batches) + 1
	if a.rejectFrom > 0 && idx >= a.rejectFrom {
		return nil, fmt.Errorf("batch %d rejected", idx)
	}
	a.batches = append(a.batches, append([]session.Event(nil), events...))
	a.inflight++
	if a.inflight > a.maxInflight {
		a.maxInflight = a.inflight
	}
	end := events[len(events)-1].Seq + 1
	return func(context.Context) (AppendResult, error) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.waited++
		if a.waited != idx {
			return AppendResult{}, fmt.Errorf("batch %d awaited out of order (after %d)", idx, a.waited-1)
		}
		a.inflight--
		if a.failBatch > 0 && idx >= a.failBatch {
			// A failed store fails every batch accepted after it too.
			return AppendResult{}, a.failErr
		}
		a.next = end
		return AppendResult{NextSeq: end}, nil
	}, nil
}

func TestAppendStreamBatchesUnderLimits(t *testing.T) {
	events := testEvents(t, 5, 200, 40)
	input := toJSONL(t, events)
	// Blank lines and CRLF endings are tolerated.
	input = "\n" + strings.Replace(input, "\n", "\r\n", 3)
	maxBytes := 3 * encodedSize(t, events[:1])
	for _, maxEvents := range []int{1, 2, 7, 1000} {
		t.Run(fmt.Sprint(maxEvents), func(t *testing.T) {
			a := &recordingAppender{}
			var progress []int64
			res, err := appendStream(context.Background(), a, "s1", strings.NewReader(input), session.ParseAppendLineWire, maxBytes, maxEvents, func(done int64) {
				progress = append(progress, done)
			})
			require.NoError(t, err)

			var all []session.Event
			for i, b := range a.batches {
				require.NotEmpty(t, b)
				require.LessOrEqual(t, len(b), maxEvents, "batch %d", i)
				require.LessOrEqual(t, encodedSize(t, b), maxBytes, "batch %d", i)
				if i+1 < len(a.batches) {
					// A batch is closed only when the next event would not fit.
					next := a.batches[i+1][0]
					full := len(b) == maxEvents || encodedSize(t, append(append([]session.Event(nil), b...), next)) > maxBytes
					require.True(t, full, "batch %d was sent before it was full", i)
				}
				all = append(all, b...)
			}
			require.Equal(t, events, all, "every event, once, in order")
			require.Equal(t, StreamResult{Events: 200, Batches: len(a.batches), Bytes: int64(len(input)), NextSeq: 205}, res)
			require.Len(t, progress, len(a.batches))
			for i := 1; i < len(progress); i++ {
				require.Greater(t, progress[i], progress[i-1])
			}
			require.Equal(t, int64(len(input)), progress[len(progress)-1])
			require.LessOrEqual(t, a.maxInflight, maxInFlight)
			if len(a.batches) > maxInFlight {
				require.Equal(t, maxInFlight, a.maxInflight, "accepted batches are pipelined")
			}
		})
	}
}

func TestAppendStreamProgressCountsStoredLinesOnly(t *testing.T) {
	events := testEvents(t, 0, 4, 10)
	lines := strings.SplitAfter(toJSONL(t, events), "\n")
	a := &recordingAppender{}
	var progress []int64
	_, err := appendStream(context.Background(), a, "s1", strings.NewReader(strings.Join(lines, "")), session.ParseAppendLineWire, 1<<20, 2, func(done int64) {
		progress = append(progress, done)
	})
	require.NoError(t, err)
	require.Equal(t, []int64{int64(len(lines[0]) + len(lines[1])), int64(len(lines[0]) + len(lines[1]) + len(lines[2]) + len(lines[3]))}, progress)
}

func TestAppendStreamTrailingBlankLines(t *testing.T) {
	input := toJSONL(t, testEvents(t, 0, 2, 10))
	var progress []int64
	res, err := appendStream(context.Background(), &recordingAppender{}, "s1", strings.NewReader(input+"\n \n"), session.ParseAppendLineWire, 1<<20, 1, func(done int64) {
		progress = append(progress, done)
	})
	require.NoError(t, err)
	require.Equal(t, int64(len(input)+3), res.Bytes, "the whole input is consumed")
	require.Equal(t, int64(len(input)+3), progress[len(progress)-1])
	require.Len(t, progress, 3)
}

func TestAppendStreamBadLineSendsNothingOfItsBatch(t *testing.T) {
	events := testEvents(t, 0, 5, 10)
	lines := strings.SplitAfter(strings.TrimSuffix(toJSONL(t, events), "\n"), "\n")
	lines[3] = `{"type":"turn/start","seq":3,"time":1}` + "\n"
	a := &recordingAppender{}
	res, err := appendStream(context.Background(), a, "s1", strings.NewReader(strings.Join(lines, "")), session.ParseAppendLineWire, 1<<20, 2, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "line 4: not a valid event")
	require.Len(t, a.batches, 1, "events 0-1 were sent; event 2 waited for its batch, which the bad line stopped")
	require.Equal(t, StreamResult{Events: 2, Batches: 1, Bytes: int64(len(lines[0]) + len(lines[1])), NextSeq: 2}, res)

	_, err = appendStream(context.Background(), &recordingAppender{}, "s1", strings.NewReader("not json\n"), session.ParseAppendLineWire, 1<<20, 2, nil)
	require.ErrorIs(t, err, ErrInvalidArgument)
	require.Contains(t, err.Error(), "line 1")
}

func TestAppendStreamOversizedEvent(t *testing.T) {
	small := testEvents(t, 0, 1, 10)
	big := testEvents(t, 1, 1, 5000)
	input := toJSONL(t, append(small, big...))
	limit := encodedSize(t, big) - 1
	a := &recordingAppender{}
	res, err := appendStream(context.Background(), a, "s1", strings.NewReader(input), session.ParseAppendLineWire, limit, 100, nil)
	require.ErrorIs(t, err, ErrBatchTooLarge)
	require.EqualError(t, err, fmt.Sprintf("line 2: append batch of %d bytes exceeds the batch limit of %d bytes", limit+1, limit))
	require.Empty(t, a.batches, "the pending small event is not sent either")
	require.Zero(t, res.Events)
}

func TestAppendStreamStoreFailure(t *testing.T) {
	events := testEvents(t, 0, 40, 10)
	storeErr := &Error{Type: "IOError", Message: "disk full"}
	a := &recordingAppender{failBatch: 3, failErr: storeErr}
	res, err := appendStream(context.Background(), a, "s1", strings.NewReader(toJSONL(t, events)), session.ParseAppendLineWire, 1<<20, 4, nil)
	require.ErrorIs(t, err, storeErr)
	require.Equal(t, int64(8), res.Events, "the two batches stored before the failure")
	require.Equal(t, int64(8), res.NextSeq)
	require.Equal(t, 2, res.Batches)
	require.LessOrEqual(t, len(a.batches), 3+maxInFlight, "no batch is submitted once the failure is known")

	rejected := &recordingAppender{rejectFrom: 2}
	res, err = appendStream(context.Background(), rejected, "s1", strings.NewReader(toJSONL(t, events)), session.ParseAppendLineWire, 1<<20, 4, nil)
	require.EqualError(t, err, "batch 2 rejected")
	require.Equal(t, int64(4), res.Events, "the accepted first batch is still awaited")
}

func TestAppendStreamEmptyInput(t *testing.T) {
	a := &recordingAppender{}
	res, err := appendStream(context.Background(), a, "s1", strings.NewReader("\n  \n"), session.ParseAppendLineWire, 1<<20, 4, func(int64) { t.Fatal("no progress without a batch") })
	require.NoError(t, err)
	require.Equal(t, StreamResult{Bytes: 4}, res)
	require.Empty(t, a.batches)
}

func TestAppendStreamSendsAcceptedUpdates(t *testing.T) {
	events := testEvents(t, 0, 3, 10)
	var opts []temporalclient.UpdateWorkflowOptions
	f := &fakeTemporal{update: func(o temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		opts = append(opts, o)
		req := o.Args[0].(wire.AppendRequest)
		return &fakeUpdate{result: AppendResult{NextSeq: req.Events[len(req.Events)-1].Seq + 1}}, nil
	}}
	c := New(f, Options{MaxBatchEvents: 2})
	res, err := c.AppendStream(context.Background(), "s1", strings.NewReader(toJSONL(t, events)), nil)
	require.NoError(t, err)
	require.Equal(t, int64(3), res.NextSeq)
	require.Len(t, opts, 2)
	for _, o := range opts {
		require.Equal(t, "session/s1", o.WorkflowID)
		require.Equal(t, wire.UpdateAppend, o.UpdateName)
		require.Equal(t, temporalclient.WorkflowUpdateStageAccepted, o.WaitForStage, "the next batch goes once this one is accepted")
	}
	require.Equal(t, session.WireEvents(events[:2]), opts[0].Args[0].(wire.AppendRequest).Events)
	require.Equal(t, session.WireEvents(events[2:]), opts[1].Args[0].(wire.AppendRequest).Events)

	rejecting := &fakeTemporal{update: func(temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		return &fakeUpdate{err: overTheWire(workflows.LifecycleDisposedError("s1"))}, nil
	}}
	_, err = New(rejecting, Options{}).AppendStream(context.Background(), "s1", strings.NewReader(toJSONL(t, events)), nil)
	require.EqualError(t, err, `agent "s1" lifecycle disposed`)
	require.ErrorIs(t, err, ErrLifecycleDisposed)
	require.False(t, errors.Is(err, ErrNotLive))
}

// AppendStreamAtEnd sends each batch at the end, numbered from 0 whatever
// seqs the input carries; AppendAtEnd sends its batch as given, with
// AtEnd.
func TestAppendStreamAtEndNumbersEachBatchFromZero(t *testing.T) {
	events := testEvents(t, 40, 3, 10)
	var reqs []wire.AppendRequest
	f := &fakeTemporal{update: func(o temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
		req := o.Args[0].(wire.AppendRequest)
		reqs = append(reqs, req)
		return &fakeUpdate{result: AppendResult{NextSeq: int64(7 * len(reqs))}}, nil
	}}
	c := New(f, Options{MaxBatchEvents: 2})
	res, err := c.AppendStreamAtEnd(context.Background(), "s1", strings.NewReader(toJSONL(t, events)), nil)
	require.NoError(t, err)
	require.Equal(t, StreamResult{Events: 3, Batches: 2, Bytes: int64(len(toJSONL(t, events))), NextSeq: 14}, res)
	require.Len(t, reqs, 2)
	for i, req := range reqs {
		require.True(t, req.AtEnd, "batch %d", i)
		for k, e := range req.Events {
			require.Equal(t, int64(k), e.Seq, "batch %d event %d", i, k)
		}
	}
	require.JSONEq(t, string(events[2].Data), string(reqs[1].Events[0].Data))

	reqs = nil
	one, err := c.AppendAtEnd(context.Background(), "s1", session.WireEvents(testEvents(t, 0, 2, 10)))
	require.NoError(t, err)
	require.Equal(t, AppendResult{NextSeq: 7}, one)
	require.Len(t, reqs, 1)
	require.True(t, reqs[0].AtEnd)
}
