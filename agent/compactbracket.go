package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// A compaction's bracket in the log: what a retry finds of its own
// compaction, and the closing of an open one.

// bracket is the state of the call's own compaction in the log.
type bracket struct {
	start      int64 // seq of compaction/start, -1 for none
	id         string
	summarySeq int64 // -1 for none
	summary    compactionSummary
	replaced   bool  // the replacing user/message is stored
	endSeq     int64 // -1 for none
	err        string
	pruned     int
}

// ownBracket reads the call's own compaction from tail (the log from seq
// 0): the first compaction/start at or after after.
func ownBracket(tail []session.Event, after int64) (bracket, error) {
	b := bracket{start: -1, summarySeq: -1, endSeq: -1}
	for _, e := range tail {
		if e.Seq < after {
			continue
		}
		switch e.Type {
		case wire.TypeCompactionPrune:
			if b.start < 0 {
				b.pruned++
			}
		case wire.TypeCompactionStart:
			if b.start >= 0 {
				continue
			}
			var d compactionStart
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return b, fmt.Errorf("compaction/start (seq %d): %w", e.Seq, err)
			}
			b.start, b.id = e.Seq, d.CompactionID
		case wire.TypeCompactionSummary:
			if b.start < 0 || b.summarySeq >= 0 {
				continue
			}
			if err := json.Unmarshal(e.Data, &b.summary); err != nil {
				return b, fmt.Errorf("compaction/summary (seq %d): %w", e.Seq, err)
			}
			if b.summary.CompactionID == b.id {
				b.summarySeq = e.Seq
			}
		case wire.TypeUserMessage:
			if b.summarySeq >= 0 && e.Seq == b.summarySeq+1 {
				b.replaced = true
			}
		case wire.TypeCompactionEnd:
			if b.start < 0 || b.endSeq >= 0 {
				continue
			}
			var d compactionStart
			if err := json.Unmarshal(e.Data, &d); err != nil {
				return b, fmt.Errorf("compaction/end (seq %d): %w", e.Seq, err)
			}
			if d.CompactionID == b.id {
				b.endSeq, b.err = e.Seq, d.Error
			}
		}
	}
	return b, nil
}

// result reports a finished bracket.
func (b bracket) result(next int64) CompactResult {
	r := CompactResult{NextSeq: next, CompactionID: b.id, SummarySeq: -1, Error: b.err, Pruned: b.pruned}
	if b.summarySeq >= 0 && b.err == "" {
		r.SummarySeq = b.summarySeq
		r.Shadowed, r.ShadowedTokens = len(b.summary.ShadowedSeqs), b.summary.ShadowedTokenCount
		r.CheckpointTokens = provider.EstimateMessage(provider.Message{Role: provider.RoleUser, Content: frameSummary(b.summary.Summary)})
	}
	return r
}

// endEvent is the compaction/end of the call's bracket id at seq.
func (c *compaction) endEvent(seq int64, id, errText string) (session.Event, error) {
	return session.NewEvent(wire.TypeCompactionEnd, seq, c.a.nowMs(),
		compactionStart{CompactionID: id, SourceCommandID: c.in.CommandID, Turn: turnOwner(c.in.Turn), Error: errText})
}

// close stores compaction/end with errText for the call's open bracket.
func (c *compaction) close(ctx context.Context, errText string) (CompactResult, error) {
	var res CompactResult
	next, err := c.h.Update(ctx, 0, func(tail []session.Event, next int64) ([]session.Event, error) {
		b, err := ownBracket(tail, c.in.After)
		if err != nil {
			return nil, err
		}
		if b.start < 0 || b.endSeq >= 0 {
			res = b.result(next)
			return nil, nil
		}
		var batch []session.Event
		if b.summarySeq >= 0 && !b.replaced {
			// The summary is stored: the compaction completes.
			e, err := checkpointEvent(next, c.a.nowMs(), b.start, b.summarySeq, b.summary, uuid.NewString())
			if err != nil {
				return nil, err
			}
			batch = append(batch, e)
			b.replaced = true
		}
		if b.summarySeq < 0 {
			b.err = errText
		} else {
			errText = ""
		}
		e, err := c.endEvent(next+int64(len(batch)), b.id, errText)
		if err != nil {
			return nil, err
		}
		b.endSeq = e.Seq
		res = b.result(next + int64(len(batch)) + 1)
		return append(batch, e), nil
	})
	if err != nil {
		return CompactResult{}, activities.MapError(err)
	}
	res.NextSeq = next
	return res, nil
}
