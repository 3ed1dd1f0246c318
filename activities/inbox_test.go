package activities_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

func userMsg(id string) map[string]any {
	return map[string]any{"id": id, "role": "user", "content": []any{map[string]any{"type": "text", "text": id}}, "source": map[string]any{"kind": "user"}}
}

func splice(target string, start, removed int, inserted ...string) map[string]any {
	msgs := []any{}
	for _, id := range inserted {
		msgs = append(msgs, userMsg(id))
	}
	d := map[string]any{"target": target, "start": start, "inserted": msgs}
	if removed > 0 {
		d["removedCount"] = removed
	}
	return d
}

func scanOf(t *testing.T, a *activities.Activities, id string, events []session.Event) activities.LogScan {
	t.Helper()
	seedSession(t, a, id, events)
	info, err := a.OpenHandle(context.Background(), activities.OpenHandleInput{SessionID: id, Access: jsonl.AccessWrite, HandleID: "w-" + id})
	require.NoError(t, err)
	sum, err := a.ScanLog(context.Background(), activities.HandleInput{Ref: info.Ref})
	require.NoError(t, err)
	return sum
}

func messageIDs(t *testing.T, msgs []json.RawMessage) []string {
	t.Helper()
	out := []string{}
	for _, m := range msgs {
		var v struct{ ID string }
		require.NoError(t, json.Unmarshal(m, &v))
		out = append(out, v.ID)
	}
	return out
}

// The scan replays the log's inbox splices into the pending inputs:
// insertions, a claim's pure deletion, an edit in the middle, both
// targets; a splice of another shape is ignored.
func TestScanReplaysInboxSplices(t *testing.T) {
	a := newActs(t)
	sum := scanOf(t, a, "ib", []session.Event{
		ev(t, wire.TypeInboxSpliced, 0, splice("next-step", 0, 0, "a", "b")),
		ev(t, wire.TypeTurnStart, 1, map[string]any{"turn": 1}),
		ev(t, wire.TypeInboxSpliced, 2, splice("next-step", 0, 2)),
		ev(t, wire.TypeTurnEnd, 3, map[string]any{"turn": 1, "reason": map[string]any{"kind": "completed"}}),
		ev(t, wire.TypeInboxSpliced, 4, splice("next-step", 0, 0, "c", "d", "e")),
		ev(t, wire.TypeInboxSpliced, 5, splice("next-step", 1, 1, "D")),
		ev(t, wire.TypeInboxSpliced, 6, splice("next-turn", 0, 0, "q")),
		ev(t, wire.TypeInboxSpliced, 7, map[string]any{"list": "nextStep", "op": "append", "messages": []any{}}),
	})
	require.NotNil(t, sum.Inbox)
	require.Equal(t, []string{"c", "D", "e"}, messageIDs(t, sum.Inbox.NextStep))
	require.Equal(t, []string{"q"}, messageIDs(t, sum.Inbox.NextTurn))
	require.Zero(t, sum.InboxOmitted)

	empty := scanOf(t, a, "none", []session.Event{ev(t, wire.TypeTurnStart, 0, map[string]any{"turn": 1})})
	require.Nil(t, empty.Inbox)
}

// Pending inputs beyond MaxInboxBytes are counted, not carried.
func TestScanOmitsAnOversizedInbox(t *testing.T) {
	a := newActs(t)
	big := func(seq int64, id string) session.Event {
		m := userMsg(id)
		m["content"] = []any{map[string]any{"type": "text", "text": strings.Repeat("x", 600<<10)}}
		return ev(t, wire.TypeInboxSpliced, seq, map[string]any{"target": "next-step", "start": seq, "inserted": []any{m}})
	}
	sum := scanOf(t, a, "big", []session.Event{big(0, "a"), big(1, "b")})
	require.Nil(t, sum.Inbox)
	require.Equal(t, 2, sum.InboxOmitted)
}
