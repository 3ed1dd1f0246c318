package workflows_test

// Appends at the end (AppendRequest.AtEnd): callers that do not agree on
// seqs send at once; what reaches the session together is stored by one
// write, each caller gets its own seqs, and one caller's bad batch fails
// alone.

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
	"github.com/sessionflow/sessionflow/workflows"
)

// callerBatch is caller c's batch of n todo/write events, numbered from 0,
// each naming its caller and its index.
func callerBatch(t *testing.T, c, n int) []session.Event {
	out := make([]session.Event, n)
	for i := range out {
		out[i] = sessiontest.Ev(t, wire.TypeTodoWrite, int64(i), map[string]any{"text": fmt.Sprintf("caller %d event %d", c, i)})
	}
	return out
}

// text is the text a callerBatch event carries.
func text(t *testing.T, e session.Event) string {
	var d struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(e.Data, &d))
	return d.Text
}

// requireOwnSeqs checks that every acknowledged caller finds its own
// events, in its order, at the seqs its result names, and that the log
// holds exactly the acknowledged events.
func requireOwnSeqs(t *testing.T, evs []session.Event, sizes map[int]int, results map[int]wire.AppendResult) {
	t.Helper()
	sessiontest.RequireContiguous(t, evs)
	total := 0
	type span struct{ first, next int64 }
	var spans []span
	for c, n := range sizes {
		r := results[c]
		first := r.NextSeq - int64(n)
		require.GreaterOrEqual(t, first, int64(0), "caller %d", c)
		require.LessOrEqual(t, r.NextSeq, int64(len(evs)), "caller %d", c)
		for i := 0; i < n; i++ {
			require.Equal(t, fmt.Sprintf("caller %d event %d", c, i), text(t, evs[first+int64(i)]), "caller %d's event %d at seq %d", c, i, first+int64(i))
		}
		spans = append(spans, span{first, r.NextSeq})
		total += n
	}
	require.Len(t, evs, total, "the log holds exactly what was acknowledged")
	sort.Slice(spans, func(i, j int) bool { return spans[i].first < spans[j].first })
	next := int64(0)
	for _, s := range spans {
		require.Equal(t, next, s.first, "the callers' seqs follow one another without gap or overlap")
		next = s.next
	}
}

// Sixteen callers send at the same instant: the batches that wait while a
// store runs are stored together by the next write, each caller's batch holds its own contiguous
// seqs in the order stored, and the caller whose batch breaks an append
// rule is refused with its own InvalidArgument while the others succeed.
func TestAtEndCallersShareOneStore(t *testing.T) {
	const callers, bad = 16, 5
	h := sessiontest.NewHarness(t).WithID("atend")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	sizes := map[int]int{}
	res := make([]*sessiontest.Result, callers)
	h.At(2*time.Second, func() {
		for c := range callers {
			batch := callerBatch(t, c, 1+c%3)
			if c == bad {
				batch[1] = sessiontest.Ev(t, "custom/x", 1, map[string]any{"text": "not ignorable"})
			} else {
				sizes[c] = len(batch)
			}
			res[c] = h.Update("", wire.UpdateAppend, workflows.AppendRequest{Events: batch, AtEnd: true})
		}
	})
	disp := h.UpdateAt(3*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "atend"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)

	results := map[int]wire.AppendResult{}
	for c := range callers {
		if c == bad {
			app := sessiontest.AppErr(t, res[c].Rejection(t))
			require.Equal(t, "InvalidArgument", app.Type())
			require.Contains(t, app.Error(), `type "custom/x"): event type "custom/x" is unknown to this build and not marked ignorable`)
			continue
		}
		var r wire.AppendResult
		res[c].Decode(t, &r)
		results[c] = r
	}
	requireOwnSeqs(t, sessiontest.Stored(t, h.Store, "atend"), sizes, results)
	// The test environment runs the workflow after each update it
	// delivers, so the first batch is stored at once, alone; the fourteen
	// that arrive while that store runs are stored by the next write.
	require.Equal(t, 2, h.Count(wire.AppendBatchName), "fifteen batches, two writes")
}

// An AtEnd batch whose seqs are not its indexes is refused before it is
// accepted.
func TestAtEndBatchNumberedFromZero(t *testing.T) {
	h := sessiontest.NewHarness(t).WithID("atend0")
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	batch := callerBatch(t, 0, 2)
	batch[1].Seq = 7
	wrong := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: batch, AtEnd: true})
	empty := h.UpdateAt(2*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{AtEnd: true})
	good := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: callerBatch(t, 1, 2), AtEnd: true})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "atend0"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)
	require.ErrorContains(t, wrong.Rejection(t), "atEnd append batch: the seq of event 1 must be 1 (its index), got 7")
	require.ErrorContains(t, empty.Rejection(t), "append batch must not be empty")
	var r wire.AppendResult
	good.Decode(t, &r)
	require.Equal(t, int64(2), r.NextSeq)
	requireOwnSeqs(t, sessiontest.Stored(t, h.Store, "atend0"), map[int]int{1: 2}, map[int]wire.AppendResult{1: r})
}

// poisoned reports whether a batch holds an event whose text says so: the
// store below refuses it, as it would a batch the validator let through.
func poisoned(in activities.AppendBatchInput) bool {
	for _, e := range in.Events {
		if strings.Contains(string(e.Data), "poison") {
			return true
		}
	}
	return false
}

// When the store refuses a group of several callers' batches, each batch
// is stored on its own: the refused one fails with its own refusal, the
// AtEnd batches after it move down to the seqs it left, the others are
// stored.
func TestAtEndRefusedBatchFailsAlone(t *testing.T) {
	const callers, bad = 6, 2
	h := sessiontest.NewHarness(t).WithID("apart")
	h.Env.OnActivity(h.Acts.AppendBatch, mock.Anything, mock.Anything).Return(
		func(ctx context.Context, in activities.AppendBatchInput) (activities.AppendResult, error) {
			if poisoned(in) {
				return activities.AppendResult{}, temporal.NewNonRetryableApplicationError("the store refuses the poison", wire.ErrTypeInvalidArgument, nil)
			}
			return h.Acts.AppendBatch(ctx, in)
		})
	ready := h.UpdateAt(time.Second, "", wire.UpdateWaitReady)
	sizes := map[int]int{}
	res := make([]*sessiontest.Result, callers)
	h.At(2*time.Second, func() {
		for c := range callers {
			batch := callerBatch(t, c, 2)
			if c == bad {
				batch[0] = sessiontest.Ev(t, wire.TypeTodoWrite, 0, map[string]any{"text": "poison"})
			} else {
				sizes[c] = len(batch)
			}
			res[c] = h.Update("", wire.UpdateAppend, workflows.AppendRequest{Events: batch, AtEnd: true})
		}
	})
	later := h.UpdateAt(3*time.Second, "", wire.UpdateAppend, workflows.AppendRequest{Events: callerBatch(t, callers, 1), AtEnd: true})
	disp := h.UpdateAt(4*time.Second, "", wire.UpdateDispose)
	h.Env.ExecuteWorkflow(workflows.CreateSession, workflows.CreateSessionRequest{SessionID: "apart"})
	require.NoError(t, h.Env.GetWorkflowError())
	ready.OK(t)
	disp.OK(t)

	results := map[int]wire.AppendResult{}
	for c := range callers {
		if c == bad {
			app := sessiontest.AppErr(t, res[c].Failure(t))
			require.Equal(t, "InvalidArgument", app.Type())
			require.Contains(t, app.Error(), "the store refuses the poison")
			continue
		}
		var r wire.AppendResult
		res[c].Decode(t, &r)
		results[c] = r
	}
	var rl wire.AppendResult
	later.Decode(t, &rl)
	sizes[callers], results[callers] = 1, rl
	require.Equal(t, int64(11), rl.NextSeq, "the session goes on after the refused batch")
	requireOwnSeqs(t, sessiontest.Stored(t, h.Store, "apart"), sizes, results)
}
