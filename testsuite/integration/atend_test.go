package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"

	sfclient "github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// TestAtEndConcurrentCallers: 16 goroutines append at the end of one
// session through the Go client (client.AppendAtEnd), each several
// batches of its own, at once; one of them sends a batch the validator
// refuses. Checked strictly against the log: every acknowledged batch is
// stored exactly once, whole, at the seqs its caller was told, in its
// caller's order; the acknowledged batches follow one another without gap
// or overlap; the refused batch is not stored; nothing else is stored but
// the batch of a call whose outcome its caller did not learn
// (ErrOutcomeUnknown: its update was lost to the client, not to the
// session), which is logged and must then be whole and stored once.
// Batches that reached the session together shared a store.
func TestAtEndConcurrentCallers(t *testing.T) {
	atEndCallers(t, 6, nil)
}

// TestAtEndConcurrentCallersContinueAsNew is TestAtEndConcurrentCallers on
// a session that continues as new every 100 history events: the server
// delivers an update a run accepted and completed again to the run it
// continued as, under the same id, which answers it without storing it
// twice.
func TestAtEndConcurrentCallersContinueAsNew(t *testing.T) {
	atEndCallers(t, 20, &wire.Options{ContinueAsNewEvents: 100})
}

// atEndCallers is the test of 16 concurrent AtEnd callers, rounds batches
// each, on a session created with opts.
func atEndCallers(t *testing.T, rounds int, opts *wire.Options) {
	const callers, bad = 16, 7
	w := newWorld(t, shared, jsonl.CompressionNone)
	w.startWorker()
	c := w.client()
	id := w.id("atend")
	run := w.create(wire.CreateSessionRequest{SessionID: id, Options: opts})
	info, err := c.WaitReady(w.ctx(), id)
	require.NoError(t, err)

	type key struct{ caller, round int }
	type ack struct {
		key
		n    int
		next int64
	}
	var (
		mu      sync.Mutex
		acks    []ack
		unknown = map[key]int{}
		badErr  error
		wg      sync.WaitGroup
	)
	for k := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				n := 1 + (k+r)%3
				batch := make([]session.Event, n)
				for i := range batch {
					batch[i] = ev(t, wire.TypeTodoWrite, int64(i), map[string]any{"text": fmt.Sprintf("caller %d round %d event %d", k, r, i)})
				}
				if k == bad && r == 2 {
					batch[0] = ev(t, "custom/x", 0, map[string]any{})
				}
				res, err := c.AppendAtEnd(w.ctx(), id, session.WireEvents(batch))
				mu.Lock()
				switch {
				case k == bad && r == 2:
					badErr = err
				case errors.Is(err, sfclient.ErrOutcomeUnknown):
					unknown[key{k, r}] = n
				case err != nil:
					t.Errorf("caller %d round %d: %v", k, r, err)
				default:
					acks = append(acks, ack{key{k, r}, n, res.NextSeq})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	require.ErrorIs(t, badErr, sfclient.ErrInvalidArgument)
	require.ErrorContains(t, badErr, `event type "custom/x" is unknown to this build and not marked ignorable`)
	_, err = c.Dispose(w.ctx(), id)
	require.NoError(t, err)
	require.NoError(t, run.Get(w.ctx(), nil))

	stored := w.storedEvents(id)
	require.Equal(t, info.NextSeq, int64(0))
	// Where each event is, by its text: every text once.
	at := map[string]int64{}
	for _, e := range stored {
		var d struct{ Text string }
		require.NoError(t, json.Unmarshal(e.Data, &d))
		prev, dup := at[d.Text]
		require.False(t, dup, "%q is stored twice: at %d and %d", d.Text, prev, e.Seq)
		at[d.Text] = e.Seq
	}
	owned := make([]bool, len(stored))
	sort.Slice(acks, func(i, j int) bool { return acks[i].next < acks[j].next })
	last := map[int]int64{}
	for _, a := range acks {
		first := a.next - int64(a.n)
		for i := range a.n {
			text := fmt.Sprintf("caller %d round %d event %d", a.caller, a.round, i)
			require.Equal(t, first+int64(i), at[text], "caller %d round %d: %q is where its caller was told", a.caller, a.round, text)
			owned[first+int64(i)] = true
		}
		require.Greater(t, first, last[a.caller]-1, "caller %d's rounds are stored in its order", a.caller)
		last[a.caller] = a.next
	}
	lost := 0
	for k, n := range unknown {
		first, ok := at[fmt.Sprintf("caller %d round %d event 0", k.caller, k.round)]
		if !ok {
			continue
		}
		lost++
		t.Logf("caller %d round %d: outcome unknown to its caller, stored at %d", k.caller, k.round, first)
		for i := range n {
			require.Equal(t, first+int64(i), at[fmt.Sprintf("caller %d round %d event %d", k.caller, k.round, i)], "a lost update's batch is whole")
			owned[first+int64(i)] = true
		}
	}
	for seq, o := range owned {
		require.True(t, o, "seq %d (%s) is no acknowledged batch's, nor a lost update's", seq, stored[seq].Data)
	}
	require.Len(t, acks, callers*rounds-1-len(unknown))
	t.Logf("%d batches acknowledged, %d with an unknown outcome (%d of them stored)", len(acks), len(unknown), lost)
	if opts != nil {
		return // the history checks below read the first run
	}

	markers, retried := 0, 0
	for _, e := range w.history(wire.WorkflowID(id), run.GetRunID()).GetEvents() {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			markers++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			retried++
		}
	}
	t.Logf("%d workflow task attempts failed or timed out; %d group stores found batches stored in another order or held events no batch claimed (a re-run attempt's)",
		retried, reorderedStores(t, w.history(wire.WorkflowID(id), run.GetRunID())))
	t.Logf("%d batches stored by %d local stores (markers, version markers included)", len(acks), markers)
	require.Less(t, markers, len(acks), "batches that reached the session together shared a store")
}

// reorderedStores counts the local group stores recorded in hist whose
// result places the group's batches out of order or reports held events
// no batch claimed: the store found what an earlier attempt of its
// workflow task, which left no history, stored.
func reorderedStores(t *testing.T, hist *historypb.History) int {
	t.Helper()
	n := 0
	for _, e := range hist.Events {
		m := e.GetMarkerRecordedEventAttributes()
		if m == nil || m.GetMarkerName() != "LocalActivity" || len(m.GetDetails()["result"].GetPayloads()) == 0 {
			continue
		}
		var res struct {
			Placed    []int64           `json:"placed"`
			Unclaimed []json.RawMessage `json:"unclaimed"`
		}
		require.NoError(t, json.Unmarshal(m.GetDetails()["result"].GetPayloads()[0].GetData(), &res))
		if len(res.Unclaimed) > 0 || !sort.SliceIsSorted(res.Placed, func(i, j int) bool { return res.Placed[i] < res.Placed[j] }) {
			n++
		}
	}
	return n
}
