package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sessionflow/sessionflow/internal/lib/randhex"
	"github.com/sessionflow/sessionflow/wire"
)

// compactPoll is how often a compaction's progress is read from the store.
const compactPoll = 200 * time.Millisecond

// compactOutcome is the answer to a Compact.
type compactOutcome struct {
	res wire.CompactResult
	err error
}

// compact runs /compact: it sends the Compact update and waits for its
// end, showing "compacting…", then (with the store) that the summary is
// being written once the log holds its compaction/start, then what the
// log's command/done says. Ctrl-C cancels the compaction (the Cancel
// update); a second one leaves, disposing the session.
func (ch *chat) compact(ctx context.Context) error {
	commandID := "chat-compact-" + randhex.String(8)
	from := ch.cursor
	fmt.Fprintln(ch.w, "compacting…")
	done := make(chan compactOutcome, 1)
	go func() {
		res, err := ch.c.Compact(ctx, ch.id, wire.CompactRequest{CommandID: commandID})
		done <- compactOutcome{res, err}
	}()
	var poll <-chan time.Time
	if ch.reader != nil {
		t := time.NewTicker(compactPoll)
		defer t.Stop()
		poll = t.C
	}
	var cancelled chan cancelOutcome
	for {
		select {
		case o := <-done:
			if err := ch.awaitCancel(cancelled); err != nil {
				return err
			}
			if o.err != nil {
				return o.err
			}
			ch.compacted(ctx, o.res)
			return nil
		case <-poll:
			if ch.compactionStarted(ctx, from, commandID) {
				fmt.Fprintln(ch.w, "summarising the earlier conversation…")
				poll = nil
			}
		case <-ch.in.interrupts:
			if cancelled != nil || time.Since(ch.lastInterrupt) < quickInterrupt {
				fmt.Fprintln(ch.w, "^C again: leaving")
				return &leaveRequest{dispose: true}
			}
			ch.lastInterrupt = time.Now()
			fmt.Fprintln(ch.w, "^C cancelling the compaction (Ctrl-C again to leave)")
			cancelled = make(chan cancelOutcome, 1)
			go func() {
				res, err := ch.c.CancelTurn(ctx, ch.id, "user", false)
				cancelled <- cancelOutcome{res, err}
			}()
		case <-ctx.Done():
			return &leaveRequest{dispose: true}
		}
	}
}

// compacted prints a compaction's outcome and moves the chat's cursor
// past its events.
func (ch *chat) compacted(ctx context.Context, res wire.CompactResult) {
	if res.Text != "" {
		fmt.Fprintln(ch.w, termText(res.Text, false))
	}
	if res.Error != "" && res.Error != res.Text {
		fmt.Fprintf(ch.w, "error: %s\n", termText(res.Error, false))
	}
	if st, err := ch.c.LoopState(ctx, ch.id); err == nil && st.NextSeq > ch.cursor {
		ch.cursor = st.NextSeq
	}
}

// compactionStarted reports whether the log holds, from seq from on, the
// compaction/start of command commandID.
func (ch *chat) compactionStarted(ctx context.Context, from int64, commandID string) bool {
	evs, err := ch.reader.ReadEvents(ctx, ch.id, from, -1)
	if err != nil {
		return false
	}
	for _, e := range evs {
		if e.Type != wire.TypeCompactionStart {
			continue
		}
		var d struct {
			SourceCommandID string `json:"sourceCommandId"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.SourceCommandID == commandID {
			return true
		}
	}
	return false
}
