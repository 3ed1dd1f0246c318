package activities

import (
	"encoding/json"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// MaxInboxBytes bounds the pending inputs a LogScan carries: beyond it
// the scan omits them (InboxOmitted) rather than carry them through
// workflow history.
const MaxInboxBytes = 1 << 20

// PendingInbox is the agent's pending inputs replayed from the log's
// agent/inbox/spliced events: the user messages still waiting, by target.
type PendingInbox struct {
	// NextTurn and NextStep are the pending user messages, in order.
	NextTurn []json.RawMessage `json:"nextTurn,omitempty"`
	NextStep []json.RawMessage `json:"nextStep,omitempty"`
}

// inboxFold replays agent/inbox/spliced events after the inherited prefix
// (FORMAT.md §1.2): each splice removes removedCount messages of its target
// list at start and inserts its messages there.
type inboxFold struct {
	inherited int64
	nextTurn  []json.RawMessage
	nextStep  []json.RawMessage
}

func (f *inboxFold) observe(e session.Event) {
	if e.Type != wire.TypeInboxSpliced || e.Seq < f.inherited {
		return
	}
	var s session.InboxSplice
	if json.Unmarshal(e.Data, &s) != nil {
		return
	}
	list := &f.nextStep
	switch s.Target {
	case wire.InboxNextTurn:
		list = &f.nextTurn
	case wire.InboxNextStep:
	default:
		return
	}
	l := *list
	start := min(max(s.Start, 0), int64(len(l)))
	end := min(start+max(s.RemovedCount, 0), int64(len(l)))
	out := make([]json.RawMessage, 0, int64(len(l))-(end-start)+int64(len(s.Inserted)))
	out = append(out, l[:start]...)
	out = append(out, s.Inserted...)
	out = append(out, l[end:]...)
	*list = out
}

// result returns the pending inputs, nil when none, and the count of
// messages omitted because they exceed MaxInboxBytes.
func (f *inboxFold) result() (*PendingInbox, int) {
	n := len(f.nextTurn) + len(f.nextStep)
	if n == 0 {
		return nil, 0
	}
	size := 0
	for _, l := range [][]json.RawMessage{f.nextTurn, f.nextStep} {
		for _, m := range l {
			size += len(m)
		}
	}
	if size > MaxInboxBytes {
		return nil, n
	}
	return &PendingInbox{NextTurn: f.nextTurn, NextStep: f.nextStep}, 0
}
