package agent

import (
	"context"
	"encoding/json"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// EndTurn closes turn in.Turn in one batch: first the calls of the
// assistant/message at in.MessageSeq that have no tool/result, in model
// order (a call never dispatched gets its tool/call and an
// ABORTED_BEFORE_DISPATCH result, or the max-tokens result when
// in.MaxTokens; a recorded call gets the result an earlier attempt staged,
// or the TOOL_OUTCOME_UNKNOWN result), then
// step/end of in.Step when it is open, then turn/end with in.Reason. It is
// idempotent: when the log already holds the turn's turn/end it stores
// nothing.
func (a *Activities) EndTurn(ctx context.Context, in EndTurnInput) (EndTurnResult, error) {
	h, err := a.Runtime.Attach(in.Ref)
	if err != nil {
		return EndTurnResult{}, err
	}
	if in.Turn < 1 {
		return EndTurnResult{}, invalidLog("end of turn %d: turns start at 1", in.Turn)
	}
	if in.Reason.Kind == "" {
		return EndTurnResult{}, invalidLog("end of turn %d: the reason has no kind", in.Turn)
	}
	staged, err := stagedOf(ctx, h, in.Turn, in.MessageSeq)
	if err != nil {
		return EndTurnResult{}, err
	}
	var commitKeys []string
	var held []session.Event
	next, err := h.Update(ctx, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
		commitKeys, held = nil, nil
		start, ended, err := turnBounds(tail, in.Turn)
		if err != nil || ended {
			return nil, err
		}
		if start < 0 {
			return nil, invalidLog("end of turn %d: the log has no turn/start of it", in.Turn)
		}
		if in.ExpectSeq > int64(start) && in.ExpectSeq < next && nextStepOpened(tail[in.ExpectSeq:], in.Turn, in.Step) {
			held = session.CloneEvents(tail[in.ExpectSeq:])
			return nil, nil
		}
		now := a.nowMs()
		var batch []session.Event
		if open, ok := openCompaction(tail[start:]); ok {
			// A compaction the turn could not finish (its activity lost
			// with its worker) is closed before the turn is.
			open.Error = errCompactionUnfinished
			e, err := session.NewEvent(wire.TypeCompactionEnd, next, now, open)
			if err != nil {
				return nil, err
			}
			batch = append(batch, e)
		}
		if in.MessageSeq >= 0 {
			if in.MessageSeq <= int64(start) || in.MessageSeq >= next {
				return nil, invalidLog("end of turn %d: seq %d is not a message of the turn", in.Turn, in.MessageSeq)
			}
			closing, keys, err := closingEvents(tail[in.MessageSeq:], in.Turn, in.MessageSeq, in.Skipped, in.MaxTokens, staged, next+int64(len(batch)), now)
			if err != nil {
				return nil, err
			}
			batch, commitKeys = append(batch, closing...), keys
		}
		seq := func() int64 { return next + int64(len(batch)) }
		// The open step is in.Step, or a later one a tool activity opened
		// with the step's last result (ToolInput.OpenNext) when the
		// workflow did not learn it (the activity failed after its store).
		if open := openStep(tail[start:], in.Turn); in.Step > 0 && open >= in.Step {
			e, err := session.NewEvent(wire.TypeStepEnd, seq(), now, wire.StepEnd{Turn: in.Turn, Step: open})
			if err != nil {
				return nil, err
			}
			batch = append(batch, e)
		}
		e, err := session.NewEvent(wire.TypeTurnEnd, seq(), now, wire.TurnEnd{Turn: in.Turn, Reason: in.Reason})
		if err != nil {
			return nil, err
		}
		return append(batch, e), nil
	})
	if err != nil {
		return EndTurnResult{}, activities.MapError(err)
	}
	if held != nil {
		return EndTurnResult{NextSeq: next, Held: activities.HeldEvents(held)}, nil
	}
	for _, k := range commitKeys {
		unstage(ctx, h, k)
	}
	if !a.NoLiveText {
		clearLive(ctx, h)
	}
	return EndTurnResult{NextSeq: next}, nil
}

// errCompactionUnfinished is the error of a compaction EndTurn closes.
const errCompactionUnfinished = "the turn ended before its compaction finished"

// openCompaction returns the data of the compaction events leave open (a
// compaction/start without its compaction/end), ok false when none is.
func openCompaction(events []session.Event) (compactionStart, bool) {
	var open compactionStart
	ok := false
	for _, e := range events {
		switch e.Type {
		case wire.TypeCompactionStart:
			if json.Unmarshal(e.Data, &open) == nil {
				ok = true
			}
		case wire.TypeCompactionEnd, wire.TypeEndSeed:
			ok = false
		}
	}
	return open, ok
}

// nextStepOpened reports whether events are the opening of step step+1 of
// turn as a turn's batch stores it: step/end of step, step/start of
// step+1, then claimed inputs only (at most activities.MaxHeld events).
func nextStepOpened(events []session.Event, turn, step int64) bool {
	if step < 1 || len(events) < 2 || len(events) > activities.MaxHeld {
		return false
	}
	se, err := events[0].StepEnd()
	if events[0].Type != wire.TypeStepEnd || err != nil || se.Turn != turn || se.Step != step {
		return false
	}
	ss, err := events[1].StepStart()
	if events[1].Type != wire.TypeStepStart || err != nil || ss.Turn != turn || ss.Step != step+1 {
		return false
	}
	for _, e := range events[2:] {
		if e.Type != wire.TypeUserMessage {
			return false
		}
	}
	return true
}

// turnBounds finds the index of the last turn/start of turn in tail (-1
// when none) and whether a turn/end of it follows.
func turnBounds(tail []session.Event, turn int64) (start int, ended bool, err error) {
	for i := len(tail) - 1; i >= 0; i-- {
		switch tail[i].Type {
		case wire.TypeTurnEnd:
			te, err := tail[i].TurnEnd()
			if err != nil {
				return -1, false, err
			}
			if te.Turn == turn {
				ended = true
			}
		case wire.TypeTurnStart:
			ts, err := tail[i].TurnStart()
			if err != nil {
				return -1, false, err
			}
			if ts.Turn == turn {
				return i, ended, nil
			}
		}
	}
	return -1, ended, nil
}

// openStep returns the step of turn that events leave open (its
// step/start without its step/end after it), 0 when none is.
func openStep(events []session.Event, turn int64) int64 {
	open := int64(0)
	for _, e := range events {
		switch e.Type {
		case wire.TypeStepStart:
			if ss, err := e.StepStart(); err == nil && ss.Turn == turn {
				open = ss.Step
			}
		case wire.TypeStepEnd:
			if se, err := e.StepEnd(); err == nil && se.Turn == turn && se.Step == open {
				open = 0
			}
		}
	}
	return open
}
