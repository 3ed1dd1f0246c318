package session

import (
	"fmt"

	"github.com/sessionflow/sessionflow/wire"
)

// Interpretable reports whether a reader of this build can interpret e: its
// type is in the vocabulary (KnownEventType) or it is marked ignorable. A
// stored log holding an event that is not interpretable is refused as a
// format this build does not support (FORMAT.md §4.5; appends: §1.5).
func (e Event) Interpretable() bool {
	return e.Ignorable || KnownEventType(e.Type)
}

// InterpretableIn reports whether a reader can interpret e in a log with
// header h: in a v0 log, the published harness's, e's type must be one the
// harness knows (HarnessEventType) unless e is ignorable, since the harness
// refuses any other; in a v3 log, Interpretable.
func (e Event) InterpretableIn(h wire.Header) bool {
	if h.Version == wire.FormatVersionV0 {
		return e.Ignorable || HarnessEventType(e.Type)
	}
	return e.Interpretable()
}

// CheckAppendable applies to a batch the structural rules that reading,
// crash repair and resume apply to a stored log, so that a batch accepted
// for append can always be read back, repaired and resumed. h is the
// session's header and stored the number of events already stored before
// the batch (the batch is assumed to continue them contiguously: see
// CheckContiguous). The rules, in order, for each event:
//
//   - its type is interpretable (Interpretable): known to this build or
//     marked ignorable, as a read requires;
//   - a session/end-seed has a readable payload (IsInheritedMarker), and an
//     {inherited:true} marker appears only in a seeded session
//     (ErrUnseededHasMarker), as a read requires (ValidateInheritedMarker);
//   - the payload fields the crash-repair scan reads are present and well
//     formed (the rules of TurnScanner.Observe: turn/start turn >= 1,
//     step/start step >= 1, assistant/message step and message.content with
//     an id on every tool-call block, tool/call callId, tool/result
//     message.source.callId);
//
// and for the batch: the first events of a seeded session (stored == 0)
// include its {inherited:true} marker (ErrSeededLacksMarker), since a read
// refuses a seeded log without one.
//
// The rules need no state beyond h and stored: a stored log that reads at
// all already satisfies them (a non-empty seeded log holds its marker, an
// unseeded one holds none). Turn and step numbering is not checked: no read,
// repair or resume depends on it.
//
// A failure wraps ErrInvalidEvent and names the offending event's index,
// seq and type and the broken rule.
func CheckAppendable(h wire.Header, stored int64, batch []Event) error {
	marked := false
	for i, e := range batch {
		if err := checkAppendableEvent(h, e); err != nil {
			return fmt.Errorf("%w at index %d (seq %d, type %q): %w", ErrInvalidEvent, i, e.Seq, e.Type, err)
		}
		if e.Type == wire.TypeEndSeed {
			tagged, _ := e.IsInheritedMarker()
			marked = marked || tagged
		}
	}
	if h.IsSeeded && stored == 0 && len(batch) > 0 && !marked {
		last := batch[len(batch)-1]
		return fmt.Errorf("%w at index %d (seq %d, type %q): %w: the first events stored in a seeded session must include its {\"inherited\":true} session/end-seed",
			ErrInvalidEvent, len(batch)-1, last.Seq, last.Type, ErrSeededLacksMarker)
	}
	return nil
}

// checkAppendableEvent applies the per-event rules of CheckAppendable.
func checkAppendableEvent(h wire.Header, e Event) error {
	if !e.Interpretable() {
		return fmt.Errorf("event type %q is unknown to this build and not marked ignorable; a reader would refuse the log as an unsupported format", e.Type)
	}
	if !e.InterpretableIn(h) {
		return fmt.Errorf("event type %q is not one the published harness knows and not marked ignorable; the harness would refuse this v0 log", e.Type)
	}
	if e.Type == wire.TypeEndSeed {
		tagged, err := e.IsInheritedMarker()
		if err != nil {
			return err
		}
		if tagged && !h.IsSeeded {
			return ErrUnseededHasMarker
		}
	}
	if _, err := readRepairFacts(e); err != nil {
		return fmt.Errorf("crash repair could not read it: %w", err)
	}
	return nil
}

// CheckRepairable applies to each event of events the payload rules of
// crash repair (the rules of TurnScanner.Observe, part of CheckAppendable):
// an event whose repair-relevant payload cannot be read could not be
// repaired or resumed later. It names the first such event by its index.
func CheckRepairable(events []Event) error {
	for i, e := range events {
		if _, err := readRepairFacts(e); err != nil {
			return fmt.Errorf("%w at index %d (seq %d, type %q): crash repair could not read it: %w", ErrInvalidEvent, i, e.Seq, e.Type, err)
		}
	}
	return nil
}
