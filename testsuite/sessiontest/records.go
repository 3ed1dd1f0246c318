package sessiontest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// WithoutRecords returns evs without the assistant/chunk and
// request/context events a model call stores beside its message
// (docs/FORMAT.md §1.2, the stream record), for tests about the turns'
// structure. It first checks what those events must be: each run of
// assistant/chunk events is cited, all of it and nothing else, by the
// assistant/message right after it (no attempt left chunks without a
// message), and a request/context comes right before a model call's chunks
// or message. The events keep their seqs.
func WithoutRecords(t *testing.T, evs []session.Event) []session.Event {
	t.Helper()
	var (
		out   []session.Event
		run   []int64
		route bool // the previous event is a request/context
	)
	for _, e := range evs {
		switch e.Type {
		case wire.TypeRequestContext:
			require.Empty(t, run, "a request/context at seq %d inside a model call's chunks", e.Seq)
			route = true
			continue
		case wire.TypeAssistantChunk:
			run = append(run, e.Seq)
			route = false
			continue
		case wire.TypeAssistantMessage:
			if run == nil {
				run = []int64{}
			}
			require.Equal(t, run, append([]int64{}, e.SourceEventSeqs...), "the assistant/message at seq %d cites the chunks right before it", e.Seq)
			run = nil
		default:
			require.Empty(t, run, "chunks without their message before seq %d", e.Seq)
			require.False(t, route, "a request/context without a model call before seq %d", e.Seq)
		}
		route = false
		out = append(out, e)
	}
	require.Empty(t, run, "chunks without their message at the end of the log")
	return out
}
