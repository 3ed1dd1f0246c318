package workflows

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// storedLog is the run's view of the stored session: the write handle it
// owns, the header, and the cursor (the seq of the next event stored) with
// the last turn stored. Other owners read its fields; only its methods
// write them, as the stores they run or learn of report.
type storedLog struct {
	*env
	ref          *wire.HandleRef
	handleOpen   bool
	header       wire.Header
	inherited    int64
	nextSeq      int64
	firstLiveSeq int64
	lastTurn     int64
	// nonce and handleN make the run's handle ids (choose).
	nonce   string
	handleN int
}

// choose picks a fresh write handle id and returns the handle: a per-run
// random nonce recorded once through SideEffect, and a counter, so replays
// choose the same ids and no two runs share one.
func (s *storedLog) choose() wire.HandleRef {
	if s.nonce == "" {
		_ = workflow.SideEffect(s.dctx, func(workflow.Context) any {
			b := make([]byte, 12)
			_, _ = rand.Read(b)
			return hex.EncodeToString(b)
		}).Get(&s.nonce)
	}
	s.handleN++
	ref := wire.HandleRef{SessionID: s.id, HandleID: fmt.Sprintf("h-%s-%d", s.nonce, s.handleN), Access: wire.AccessWrite}
	s.ref = &ref
	return ref
}

// opened records the handle's open (or create) and what it reported.
func (s *storedLog) opened(header wire.Header, inherited, next int64) {
	s.handleOpen = true
	s.header, s.inherited, s.nextSeq = header, inherited, next
}

// repaired records what a resume's repair reported: the log after its
// closers and end-seed marker; the live events start at firstLive.
func (s *storedLog) repaired(header wire.Header, inherited, next, lastTurn, firstLive int64) {
	s.header, s.inherited, s.nextSeq, s.lastTurn = header, inherited, next, lastTurn
	s.firstLiveSeq = firstLive
}

// planned records a create's plan: the seq its live events start at and
// the last turn of its seed.
func (s *storedLog) planned(firstLive, lastTurn int64) {
	s.firstLiveSeq, s.lastTurn = firstLive, lastTurn
}

// seeded records a fork's stored seed: the cursor and last turn the store
// reported.
func (s *storedLog) seeded(next, lastTurn int64) {
	s.nextSeq, s.lastTurn = next, lastTurn
}

// noteTurn records turn as stored if it is later than the last.
func (s *storedLog) noteTurn(turn int64) {
	s.lastTurn = max(s.lastTurn, turn)
}

// follow moves the cursor to next if it is further: what an agent
// activity stored.
func (s *storedLog) follow(next int64) {
	s.nextSeq = max(s.nextSeq, next)
}

// moveTo sets the cursor to next: the log as the store reported it.
func (s *storedLog) moveTo(next int64) {
	s.nextSeq = next
}

// stored records the store of events up to next: the cursor, and the last
// turn they start (a batch without a turn/start keeps the last turn;
// LastTurn is 0 only then: a decoded turn/start numbers its turn from 1).
func (s *storedLog) stored(next int64, events []session.Event) {
	s.nextSeq = next
	if t := session.LastTurn(events); t > 0 {
		s.lastTurn = t
	}
}

// storeBatch appends events through the handle (not raced: a stored
// suffix is legitimate history).
func (s *storedLog) storeBatch(events []session.Event) error {
	if len(events) == 0 {
		return nil
	}
	var res activities.AppendResult
	err := workflow.ExecuteActivity(s.act(s.set.storeCtx(s.dctx), eventsLabel(len(events))), acts.AppendBatch,
		activities.AppendBatchInput{Ref: *s.ref, Events: events}).Get(s.dctx, &res)
	if err != nil {
		return unwrapActivity(err)
	}
	s.nextSeq = res.NextSeq
	return nil
}

// closeHandle closes the write handle (CloseHandle); closed records it.
func (s *storedLog) closeHandle(ctx workflow.Context) error {
	return unwrapActivity(workflow.ExecuteActivity(s.act(s.set.storeCtx(ctx), "close the write handle"), acts.CloseHandle,
		activities.HandleInput{Ref: *s.ref}).Get(ctx, nil))
}

// closed records that the handle is closed (or given up).
func (s *storedLog) closed() {
	s.handleOpen = false
}

// restore takes the log of the run before continue-as-new.
func (s *storedLog) restore(state LiveState) {
	ref := state.Handle
	s.ref = &ref
	s.handleOpen = true
	s.header = state.Header
	s.inherited = state.InheritedEventCount
	s.nextSeq = state.NextSeq
	s.firstLiveSeq = state.FirstLiveSeq
	s.lastTurn = state.LastTurn
}
