package workflows

import (
	"slices"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"go.temporal.io/sdk/workflow"
)

// The events a group store found stored ahead of the workflow's cursor
// that no batch of its group claimed, or a turn's opening store found
// where its turn/start goes, kept for the Appends at the end that they are
// (docs/DECISIONS.md D126).

// dropAhead forgets the held events in [first, next): a batch whose
// caller chose those seqs was verified there.
func (q *appendQueue) dropAhead(first, next int64) {
	if len(q.ahead) > 0 {
		q.ahead = slices.DeleteFunc(q.ahead, func(h jsonl.HeldPrint) bool { return h.Seq >= first && h.Seq < next })
	}
}

// renumberPending numbers the pending AtEnd batches after the stored
// cursor and the pending batches before them; the others keep the seqs
// their callers chose.
func (q *appendQueue) renumberPending() {
	next := q.log.nextSeq
	for _, it := range q.pending {
		if it.atEnd {
			renumber(it.events, next)
		}
		next += int64(len(it.events))
	}
}

// keepAhead adds the held events a group store reported unclaimed, or a
// turn's opening store reported appended (turnRun.keepAhead), to ahead (in seq order, without duplicates), keeping the latest
// maxAppendsAhead.
func (q *appendQueue) keepAhead(held []jsonl.HeldPrint) {
	if len(held) == 0 {
		return
	}
	workflow.GetLogger(q.dctx).Info("a store found stored events no Append has claimed yet: kept ahead for the Appends at the end that bring them",
		"SessionID", q.id, "Events", len(held), "FirstSeq", held[0].Seq, "LastSeq", held[len(held)-1].Seq)
	for _, h := range held {
		if !slices.ContainsFunc(q.ahead, func(a jsonl.HeldPrint) bool { return a.Seq == h.Seq }) {
			q.ahead = append(q.ahead, h)
		}
	}
	slices.SortFunc(q.ahead, func(a, b jsonl.HeldPrint) int { return int(a.Seq - b.Seq) })
	if n := len(q.ahead); n > maxAppendsAhead {
		q.ahead = slices.Clone(q.ahead[n-maxAppendsAhead:])
	}
}

// claimAhead answers an AtEnd batch that the log already holds: when
// ahead holds a run of consecutive seqs whose prints are the batch's, in
// order, that run is the batch (stored by a workflow task attempt that
// left no history, before this run admitted its update); it is claimed
// (removed from ahead) and its end returned.
func (q *appendQueue) claimAhead(events []session.Event) (int64, bool) {
	if len(q.ahead) < len(events) || len(events) == 0 {
		return 0, false
	}
	prints := make([]string, len(events))
	for i, e := range events {
		p, err := session.Print(e)
		if err != nil {
			return 0, false
		}
		prints[i] = p
	}
	for s := 0; s+len(prints) <= len(q.ahead); s++ {
		run := q.ahead[s : s+len(prints)]
		ok := true
		for k, p := range prints {
			if run[k].Print != p || run[k].Seq != run[0].Seq+int64(k) {
				ok = false
				break
			}
		}
		if ok {
			next := run[0].Seq + int64(len(run))
			q.ahead = slices.Delete(q.ahead, s, s+len(prints))
			q.log.noteTurn(session.LastTurn(events))
			return next, true
		}
	}
	return 0, false
}

// An Append whose outcome the client did not learn (its call timed out
// while no worker ran the session, say) may still be accepted later; the
// client's retry of the same batch must then succeed rather than fail its
// seq check. A batch below the stored cursor already does (the store
// verifies it); a batch identical to one accepted and not yet stored is
// accepted too, and answered with the outcome of the batch it repeats.
