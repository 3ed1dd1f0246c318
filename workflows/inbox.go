package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/internal/lib/wftrace"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// The inbox of the agent loop: the user messages queued by Followup, Steer
// and Inject. Inputs travel in the update that queues them and are held in
// workflow state (carried across continue-as-new) until a turn claims them;
// a claimed input is stored as a user/message event in the step that claims
// it. Only an Inject while the loop is idle is stored at once, as an
// agent/inbox/spliced insertion (it may wait indefinitely for a turn); its
// claim is stored as a deletion splice, so the stored splices always
// replay to the inputs still pending.

// inbox is the loop's pending inputs.
type inbox struct {
	nextTurn []PendingInput
	nextStep []PendingInput
	// wake says a waking input (Followup, Steer) is pending.
	wake bool
	// ahead are inputs stored by an earlier attempt of a workflow task
	// before this run admitted their updates (turn_reconcile.go).
	ahead []AheadInput
	// claimed are the latest inputs turns stored (turn_reconcile.go).
	claimed []ClaimedInput
}

func (b *inbox) state() *InboxState {
	if len(b.nextTurn) == 0 && len(b.nextStep) == 0 && !b.wake && len(b.ahead) == 0 && len(b.claimed) == 0 {
		return nil
	}
	return &InboxState{NextTurn: slices.Clone(b.nextTurn), NextStep: slices.Clone(b.nextStep), Wake: b.wake,
		StoredAhead: slices.Clone(b.ahead), Claimed: slices.Clone(b.claimed)}
}

func (b *inbox) restore(s *InboxState) {
	if s == nil {
		return
	}
	b.nextTurn, b.nextStep, b.wake = slices.Clone(s.NextTurn), slices.Clone(s.NextStep), s.Wake
	b.ahead = slices.Clone(s.StoredAhead)
	b.claimed = slices.Clone(s.Claimed)
}

func (b *inbox) len() int { return len(b.nextTurn) + len(b.nextStep) }

// bytes is the encoded size of the pending messages.
func (b *inbox) bytes() int {
	n := 0
	for _, p := range b.nextTurn {
		n += len(p.Message)
	}
	for _, p := range b.nextStep {
		n += len(p.Message)
	}
	return n
}

func (b *inbox) has(id string) bool {
	in := func(l []PendingInput) bool {
		return slices.ContainsFunc(l, func(p PendingInput) bool { return p.ID == id })
	}
	return in(b.nextTurn) || in(b.nextStep)
}

// storedNextStep counts the next-step inputs held by stored splices: the
// length of the stored next-step list.
func (b *inbox) storedNextStep() int { return storedCount(b.nextStep) }

// storedCount counts the inputs of l held by stored splices. They precede
// the others: they come from a resume (which runs before any input
// arrives) or from an idle Inject, and a turn claims every next-step input.
func storedCount(l []PendingInput) int {
	n := 0
	for _, p := range l {
		if p.Stored {
			n++
		}
	}
	return n
}

// restoreStored makes the inputs a resume replayed from the log's splices
// pending; they wait for a waking input, as before the crash.
func (b *inbox) restoreStored(p *activities.PendingInbox) {
	if p == nil {
		return
	}
	n := 0
	conv := func(msgs []json.RawMessage) []PendingInput {
		var out []PendingInput
		for _, m := range msgs {
			n++
			var head struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(m, &head)
			if head.ID == "" || b.has(head.ID) || slices.ContainsFunc(out, func(q PendingInput) bool { return q.ID == head.ID }) {
				head.ID = fmt.Sprintf("stored-%d", n)
			}
			out = append(out, PendingInput{ID: head.ID, Message: m, Stored: true})
		}
		return out
	}
	b.nextTurn = conv(p.NextTurn)
	b.nextStep = conv(p.NextStep)
}

// clear discards every pending input and returns their ids.
func (b *inbox) clear() []string {
	out := append(ids(b.nextStep), ids(b.nextTurn)...)
	b.nextTurn, b.nextStep, b.wake = nil, nil, false
	return out
}

// ids lists the ids of l.
func ids(l []PendingInput) []string {
	out := make([]string, 0, len(l))
	for _, p := range l {
		out = append(out, p.ID)
	}
	return out
}

// queue queues p for target; wake marks a waking input pending.
func (b *inbox) queue(p PendingInput, target string, wake bool) {
	if target == wire.TargetNextTurn {
		b.nextTurn = append(b.nextTurn, p)
	} else {
		b.nextStep = append(b.nextStep, p)
	}
	if wake {
		b.wake = true
	}
}

// unqueue removes the next-step input id (an idle Inject not stored).
func (b *inbox) unqueue(id string) {
	b.nextStep = slices.DeleteFunc(b.nextStep, func(q PendingInput) bool { return q.ID == id })
}

// requeue puts inputs a turn claimed back at the front of the next-step
// inbox.
func (b *inbox) requeue(ps []PendingInput) {
	b.nextStep = append(slices.Clone(ps), b.nextStep...)
}

// noteAhead keeps id as stored by turn ahead of its update (the latest
// maxStoredAhead).
func (b *inbox) noteAhead(id string, turn int64) {
	b.ahead = append(b.ahead, AheadInput{ID: id, Turn: turn})
	if n := len(b.ahead); n > maxStoredAhead {
		b.ahead = slices.Clone(b.ahead[n-maxStoredAhead:])
	}
}

// isAhead reports whether id was stored ahead of its update (noteAhead)
// and its update is still to come.
func (b *inbox) isAhead(id string) bool {
	return slices.ContainsFunc(b.ahead, func(s AheadInput) bool { return s.ID == id })
}

// setWake says whether a turn is due for the inputs pending.
func (b *inbox) setWake(wake bool) {
	b.wake = wake
}

// claim removes the inputs a step claims: at the start of a turn every
// next-step input and the first next-turn input; later, the next-step
// inputs. It returns them and the deletion splice of the stored ones.
func (b *inbox) claim(first bool, seq, now int64) ([]PendingInput, []session.Event, error) {
	var splices []session.Event
	remove := func(target string, n int) error {
		if n == 0 {
			return nil
		}
		e, err := session.NewEvent(wire.TypeInboxSpliced, seq+int64(len(splices)), now, session.InboxSplice{
			Target: target, Start: 0, RemovedCount: int64(n), Inserted: []json.RawMessage{},
		})
		splices = append(splices, e)
		return err
	}
	claimed := b.nextStep
	b.nextStep = nil
	if err := remove(wire.TargetNextStep, storedCount(claimed)); err != nil {
		return nil, nil, err
	}
	if first && len(b.nextTurn) > 0 {
		p := b.nextTurn[0]
		claimed = append(claimed, p)
		b.nextTurn = slices.Clone(b.nextTurn[1:])
		if err := remove(wire.TargetNextTurn, storedCount([]PendingInput{p})); err != nil {
			return nil, nil, err
		}
	}
	return claimed, splices, nil
}

// traceParent is the trace context of the input a turn starts with: the
// first next-turn input's, else the first next-step input's.
func (b *inbox) traceParent() wftrace.Carrier {
	for _, q := range [][]PendingInput{b.nextTurn[:min(1, len(b.nextTurn))], b.nextStep} {
		for _, p := range q {
			if len(p.Trace) > 0 {
				return p.Trace
			}
		}
	}
	return nil
}

// take removes the pending input id from the inbox and returns it.
func (b *inbox) take(id string) (PendingInput, bool) {
	for _, l := range []*[]PendingInput{&b.nextStep, &b.nextTurn} {
		if i := slices.IndexFunc(*l, func(p PendingInput) bool { return p.ID == id }); i >= 0 {
			p := (*l)[i]
			*l = slices.Delete(slices.Clone(*l), i, i+1)
			return p, true
		}
	}
	return PendingInput{}, false
}

// takeAhead reports whether id was stored ahead of its update, and forgets
// it: the update is answered as claimed by that turn.
func (b *inbox) takeAhead(id string) (AheadInput, bool) {
	i := slices.IndexFunc(b.ahead, func(s AheadInput) bool { return s.ID == id })
	if i < 0 {
		return AheadInput{}, false
	}
	s := b.ahead[i]
	b.ahead = slices.Delete(slices.Clone(b.ahead), i, i+1)
	return s, true
}

// noteClaimed keeps the inputs turn stored.
func (b *inbox) noteClaimed(turn int64, stored []PendingInput) {
	for _, p := range stored {
		b.claimed = append(b.claimed, ClaimedInput{ID: p.ID, Sum: messageSum(p.Message), Turn: turn})
	}
	if n := len(b.claimed); n > maxRecentClaims {
		b.claimed = slices.Clone(b.claimed[n-maxRecentClaims:])
	}
}

// delivered reports whether p is an input already queued or stored (the
// same id and message), delivered again, and the turn that claimed it (0
// while it is pending).
func (b *inbox) delivered(p PendingInput) (int64, bool) {
	same := func(q PendingInput) bool { return q.ID == p.ID && bytes.Equal(q.Message, p.Message) }
	if slices.ContainsFunc(b.nextStep, same) || slices.ContainsFunc(b.nextTurn, same) {
		return 0, true
	}
	sum := messageSum(p.Message)
	for i := len(b.claimed) - 1; i >= 0; i-- {
		if c := b.claimed[i]; c.ID == p.ID && bytes.Equal(c.Sum, sum) {
			return c.Turn, true
		}
	}
	return 0, false
}
