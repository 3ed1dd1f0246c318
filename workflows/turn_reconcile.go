package workflows

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/agent"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// A turn's batch claims the inputs its workflow task admitted. When that
// task is retried after its local store ran (its completion was refused:
// it timed out, or its worker died), the next attempt admits the updates
// again, possibly in another grouping, and builds another batch at the same
// seqs. The store reports what the earlier attempt stored instead of
// writing (jsonl.Handle.AppendReconcile) and the turn adopts it: the log
// is the truth (docs/DECISIONS.md D77, LIFECYCLE.md §13.2).

// AheadInput is an input an earlier attempt of a workflow task stored
// before this attempt admitted its update: when the update comes, it is
// answered without being queued again.
type AheadInput struct {
	// ID is the message id.
	ID string `json:"id"`
	// Turn is the turn that stored it.
	Turn int64 `json:"turn"`
}

// maxStoredAhead bounds the stored-ahead ids kept (the oldest go first):
// an update whose earlier attempt was never recorded comes back within the
// next workflow tasks, or not at all.
const maxStoredAhead = 4 * wire.MaxPendingInputs

// messageID is the id in a user message's data.
func messageID(msg json.RawMessage) string {
	var m struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal(msg, &m)
	return m.ID
}

// adoptHeld makes the turn's state what the log holds where its batch
// (events, whose user/message events are the last len(claimed) claimed
// inputs) was to go: the same events but for the claimed inputs, as the
// earlier attempt stored them. Inputs the batch claims that the log does
// not hold go back to the front of the next-step inbox; inputs the log
// holds that this attempt has not admitted are stored ahead, and one this
// attempt queued since the claim leaves the inbox. It returns the message
// ids the log holds, in order. Any other difference is refused as the
// store refused it before.
func (t *turnRun) adoptHeld(events []session.Event, claimed []PendingInput, res activities.AppendResult) ([]string, error) {
	a := t.a
	first := events[0].Seq
	refuse := func(why string) error {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the log of %s holds other events at seqs %d..%d than the turn's batch: %s",
			quoteID(a.id), first, res.NextSeq-1, why), "SeqMismatch", nil)
	}
	built, msgs := splitClaims(events)
	if msgs > len(claimed) {
		return nil, refuse("the batch claims inputs it does not hold")
	}
	claimed = claimed[len(claimed)-msgs:]
	if ended, err := t.heldTurnEnd(built, claimed, res, refuse); err != nil {
		return nil, err
	} else if ended != nil {
		return nil, ended
	}
	// The head of the held run is the earlier attempt's version of this
	// batch: its events besides the claimed inputs, then the inputs.
	var heldIDs []string
	k, structs := 0, 0
	for ; k < len(res.Held); k++ {
		h := res.Held[k]
		if h.Type == wire.TypeUserMessage {
			heldIDs = append(heldIDs, h.MessageID)
			continue
		}
		if structs == len(built) {
			break
		}
		if len(heldIDs) > 0 {
			return nil, refuse("a " + h.Type + " follows claimed inputs")
		}
		if e := built[structs]; h.Type != e.Type || !bytes.Equal(h.Data, e.Data) {
			return nil, refuse(fmt.Sprintf("a %s where the batch has a %s", h.Type, e.Type))
		}
		structs++
	}
	if structs != len(built) {
		return nil, refuse(fmt.Sprintf("%d events besides the inputs, the batch has %d", structs, len(built)))
	}
	same := len(heldIDs) == len(claimed)
	for i := 0; same && i < len(claimed); i++ {
		same = heldIDs[i] == messageID(claimed[i].Message)
	}
	if k < len(res.Held) {
		if !same {
			return nil, refuse("other inputs, and a " + res.Held[k].Type + " after them")
		}
		// The batch as built, and what the earlier attempt stored after
		// it (AppendRerun's rule, FORMAT.md §4.6).
		return inputIDs(heldIDs, claimed), nil
	}
	if same {
		return inputIDs(heldIDs, claimed), nil
	}
	if !a.gates.taken(a.dctx, turnReconcileChange) {
		return nil, refuse("this run predates adopting them")
	}
	b := &a.inbox
	var back []PendingInput
	for _, p := range claimed {
		if !slices.Contains(heldIDs, messageID(p.Message)) {
			if p.Stored {
				return nil, refuse("an input held by a stored splice is not among them")
			}
			back = append(back, p)
		}
	}
	turn := t.summary.Turn
	for _, id := range heldIDs {
		if slices.ContainsFunc(claimed, func(p PendingInput) bool { return messageID(p.Message) == id }) {
			continue
		}
		if p, ok := b.take(id); ok {
			// Admitted since the claim: it is stored already.
			b.noteClaimed(turn, []PendingInput{p})
			continue
		}
		b.noteAhead(id, turn)
	}
	b.requeue(back)
	heldIDs = inputIDs(heldIDs, claimed)
	workflow.GetLogger(a.dctx).Warn("the log holds the turn's batch as an earlier attempt of the workflow task stored it; adopted",
		"SessionID", a.id, "Seq", first, "NextSeq", res.NextSeq, "Held", len(heldIDs), "Requeued", len(back))
	return heldIDs, nil
}

// maxKeepAhead bounds how many times one store of a turn's batch keeps
// appended events ahead and tries again (a late write of another
// unrecorded attempt may land between two tries).
const maxKeepAhead = 4

// keepAhead makes the turn's batch (events, the first of them the turn's
// turn/start, not written) go after the events an append stored where it
// was to start (res.Ahead, by seq and print): they are kept ahead for the
// Appends that bring them (appendQueue.keepAhead), the cursor moves past
// them and the batch, and the turn's start, are numbered from there
// (docs/DECISIONS.md D126). tries counts the calls for this store: more
// than maxKeepAhead, or a run that does not start at the batch's first seq
// and follow on, is refused as the store refused it before. A run that
// predates the change refuses it too.
func (t *turnRun) keepAhead(events []session.Event, res activities.AppendResult, tries int) error {
	a := t.a
	first := events[0].Seq
	refuse := func(why string) error {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the log of %s holds other events at seqs %d..%d than the turn's batch: %s",
			quoteID(a.id), first, res.NextSeq-1, why), "SeqMismatch", nil)
	}
	for i, h := range res.Ahead {
		if h.Seq != first+int64(i) {
			return refuse(fmt.Sprintf("the appended events reported are not seqs %d on", first))
		}
	}
	if tries > maxKeepAhead {
		return refuse(fmt.Sprintf("appended events found %d times", tries))
	}
	if !a.gates.taken(a.dctx, turnAheadChange) {
		return refuse("this run predates keeping appended events ahead")
	}
	next := first + int64(len(res.Ahead))
	a.appends.keepAhead(res.Ahead)
	a.log.moveTo(next)
	if t.summary.StartSeq == first {
		t.summary.StartSeq = next
	}
	renumber(events, next)
	workflow.GetLogger(a.dctx).Warn("the log holds appended events where the turn starts; kept ahead, the turn goes after them",
		"SessionID", a.id, "Turn", t.summary.Turn, "Seq", first, "Events", len(res.Ahead))
	return nil
}

// turnEndedHeld is adoptHeld's report that the earlier attempt ended the
// turn where this one stores its next step: the turn ends as stored.
type turnEndedHeld struct {
	reason wire.TurnEndReason
	// next is the seq after the stored turn/end.
	next int64
}

func (e *turnEndedHeld) Error() string { return "the turn ended as stored by an earlier attempt" }

// heldTurnEnd recognizes a held run in which the earlier attempt ended the
// turn (EndTurn's step/end and turn/end) where this one opens a step:
// every held event before the turn/end is one the batch holds at its
// place, none a claimed input or a splice. The claimed inputs go back to
// the front of the next-step inbox and the turn ends with the stored
// reason (adoptHeld returns the *turnEndedHeld as its error). It returns
// nil, nil when the held run does not end the turn.
func (t *turnRun) heldTurnEnd(built []session.Event, claimed []PendingInput, res activities.AppendResult, refuse func(string) error) (*turnEndedHeld, error) {
	a := t.a
	end := slices.IndexFunc(res.Held, func(h activities.HeldEvent) bool { return h.Type == wire.TypeTurnEnd })
	if end < 0 {
		return nil, nil
	}
	var te wire.TurnEnd
	if err := json.Unmarshal(res.Held[end].Data, &te); err != nil || te.Turn != t.summary.Turn {
		return nil, refuse("a turn/end of another turn")
	}
	for i, h := range res.Held[:end] {
		if h.Type == wire.TypeUserMessage || h.Type == wire.TypeInboxSpliced || i >= len(built) ||
			h.Type != built[i].Type || !bytes.Equal(h.Data, built[i].Data) {
			return nil, refuse("the turn ended after other events than the batch's")
		}
	}
	if slices.ContainsFunc(claimed, func(p PendingInput) bool { return p.Stored }) {
		return nil, refuse("the turn ended without claiming the inputs of stored splices")
	}
	if !a.gates.taken(a.dctx, turnReconcileChange) {
		return nil, refuse("this run predates adopting it")
	}
	a.inbox.requeue(claimed)
	first := res.NextSeq - int64(len(res.Held))
	workflow.GetLogger(a.dctx).Warn("the log holds the turn's end as an earlier attempt of the workflow task stored it; adopted",
		"SessionID", a.id, "Seq", first, "Requeued", len(claimed))
	return &turnEndedHeld{reason: te.Reason, next: first + int64(end) + 1}, nil
}

// inputIDs maps the message ids of held user messages to the ids of the
// claimed inputs they are (an input restored from stored splices may carry
// another id than its message's).
func inputIDs(held []string, claimed []PendingInput) []string {
	out := make([]string, len(held))
	for i, id := range held {
		out[i] = id
		if j := slices.IndexFunc(claimed, func(p PendingInput) bool { return messageID(p.Message) == id }); j >= 0 {
			out[i] = claimed[j].ID
		}
	}
	return out
}

// splitClaims returns the events of a turn's batch but its user/message
// events, and how many user/message events it has.
func splitClaims(events []session.Event) ([]session.Event, int) {
	var out []session.Event
	n := 0
	for _, e := range events {
		if e.Type == wire.TypeUserMessage {
			n++
			continue
		}
		out = append(out, e)
	}
	return out, n
}

// adoptNextStep makes the turn go on with the step an earlier attempt of
// the workflow task opened where this one ended the turn: EndTurn found
// the step/end of step, the step/start of step+1 and that step's claimed
// inputs (res.Held) and stored nothing. The held inputs are the step's
// claim: one this attempt has queued leaves the inbox, the others are
// stored ahead. The turn continues with the step's model call.
func (t *turnRun) adoptNextStep(step int64, res agent.EndTurnResult) error {
	a := t.a
	h := res.Held
	first := res.NextSeq - int64(len(h))
	if len(h) < 2 || h[0].Type != wire.TypeStepEnd || h[1].Type != wire.TypeStepStart {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the log of %s holds other events at seqs %d..%d than the end of turn %d", quoteID(a.id), first, res.NextSeq-1, t.summary.Turn), "SeqMismatch", nil)
	}
	if !a.gates.taken(a.dctx, turnReconcileChange) {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(
			"the log of %s holds step %d of turn %d, opened by a run that predates adopting it", quoteID(a.id), step+1, t.summary.Turn), "SeqMismatch", nil)
	}
	b := &a.inbox
	for _, e := range h[2:] {
		id := e.MessageID
		if p, ok := b.take(id); ok {
			b.noteClaimed(t.summary.Turn, []PendingInput{p})
		} else {
			b.noteAhead(id, t.summary.Turn)
		}
		t.summary.Claimed = append(t.summary.Claimed, id)
	}
	t.step, t.calls = step+1, nil
	a.log.moveTo(res.NextSeq)
	workflow.GetLogger(a.dctx).Warn("the log holds the turn's next step as an earlier attempt of the workflow task stored it; adopted",
		"SessionID", a.id, "Seq", first, "Step", step+1, "Held", len(h)-2)
	return nil
}

// ClaimedInput is an input a turn stored, kept (the latest
// maxRecentClaims, carried across continue-as-new) so that its update,
// delivered again, is answered and not stored twice: the server keeps an
// update's id only within its run, and a client sends an update again when
// its answer was lost (docs/DECISIONS.md D77).
type ClaimedInput struct {
	// ID is the message id.
	ID string `json:"id"`
	// Sum is the SHA-256 of the message (the user/message data).
	Sum []byte `json:"sum"`
	// Turn is the turn that claimed it.
	Turn int64 `json:"turn"`
}

// maxRecentClaims bounds the claimed inputs kept for deduplication.
const maxRecentClaims = 4 * wire.MaxPendingInputs

// messageSum is the digest of a message kept in ClaimedInput.
func messageSum(msg []byte) []byte {
	s := sha256.Sum256(msg)
	return s[:]
}
