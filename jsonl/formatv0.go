package jsonl

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Format v0 is the log format of the published DeepSeek Harness (FORMAT.md
// §8.2): the generation file session.jsonl[.zstd] in the same
// project/session directories, the same event lines and zstd framing, and a
// header line
//
//	{type, version:0, id, createdAt, cwd?, parentSession?, seedLength?, origin?, delegationDepth, agentPreset?}
//
// where seedLength is the number of events a fork child inherited. There is
// no isSeeded key and no inherited end-seed marker: the header carries the
// count.

// v0Generation is the generation file name of format v0 in an encoding.
func v0Generation(comp Compression) string {
	if comp == CompressionZstd {
		return "session.jsonl.zstd"
	}
	return "session.jsonl"
}

// generationFile is the generation file name of a format version in an
// encoding (FORMAT.md §3.4): version 0 is session.jsonl, N >= 1 session.vN.jsonl.
func generationFile(version int, comp Compression) string {
	if version == wire.FormatVersionV0 {
		return v0Generation(comp)
	}
	name := fmt.Sprintf("session.v%d.jsonl", version)
	if comp == CompressionZstd {
		name += ".zstd"
	}
	return name
}

// parseHeaderV0 decodes a version 0 header line, with the guard of the
// harness that writes it: type "session", string id, createdAt and
// delegationDepth non-negative safe integers, origin only "subagent",
// agentPreset a string, seedLength (when present) a non-negative safe
// integer. Like that harness, other keys are tolerated, except the retired
// policy fields.
func parseHeaderV0(raw map[string]json.RawMessage) (wire.Header, error) {
	h := wire.Header{Version: wire.FormatVersionV0}
	if err := refuseRetiredFields(raw); err != nil {
		return h, err
	}
	if err := decodeHeaderCore(raw, &h); err != nil {
		return h, err
	}
	if v, ok := raw["seedLength"]; ok {
		var err error
		if h.SeedLength, err = session.ParseSafeInt(v); err != nil {
			return h, errHeaderShape
		}
		h.IsSeeded = true
	}
	if err := finishHeader(raw, &h); err != nil {
		return h, err
	}
	return h, nil
}

// headerWireV0 fixes the key order of a version 0 header line (FORMAT.md §8.2).
type headerWireV0 struct {
	Type            string `json:"type"`
	Version         int    `json:"version"`
	ID              string `json:"id"`
	CreatedAt       int64  `json:"createdAt"`
	Cwd             string `json:"cwd,omitempty"`
	ParentSession   string `json:"parentSession,omitempty"`
	SeedLength      *int64 `json:"seedLength,omitempty"`
	Origin          string `json:"origin,omitempty"`
	DelegationDepth int64  `json:"delegationDepth"`
	AgentPreset     string `json:"agentPreset,omitempty"`
}

// encodeHeaderLineV0 renders a version 0 header line including its newline;
// a seeded header stores its inherited count as seedLength.
func encodeHeaderLineV0(h wire.Header, inherited int64) ([]byte, error) {
	w := headerWireV0{Type: "session", Version: wire.FormatVersionV0, ID: h.ID, CreatedAt: h.CreatedAt, Cwd: h.Cwd,
		ParentSession: h.ParentSession, Origin: h.Origin, DelegationDepth: h.DelegationDepth, AgentPreset: h.AgentPreset}
	if h.IsSeeded {
		w.SeedLength = &inherited
	}
	return marshalLine(w)
}

// errSeedLengthExceedsLog reports a v0 header whose seedLength is larger
// than the log it heads.
var errSeedLengthExceedsLog = errors.New("session inherited event count exceeds its event log")

// inheritedCount is the inherited event count of a stored log: the v0
// header's seedLength, or, in format v3, the seq of the last inherited
// end-seed marker (FORMAT.md §2.2).
func inheritedCount(h wire.Header, events []session.Event) (int64, error) {
	if h.Version == wire.FormatVersionV0 {
		return h.SeedLength, nil
	}
	return session.InheritedEventCount(events)
}

// validateInherited checks that a stored log agrees with its header's fork
// cut: in v3 through the inherited marker, in v0 by the seedLength fitting
// the log.
func validateInherited(h wire.Header, events []session.Event) error {
	if h.Version == wire.FormatVersionV0 {
		if h.SeedLength > int64(len(events)) {
			return errSeedLengthExceedsLog
		}
		return nil
	}
	return session.ValidateInheritedMarker(h, events)
}

// spellFor writes the replace surface operations of batch, the store's own
// copy, in the spelling of the log's format (FORMAT.md §1.1): {op, start,
// end} in a v0 log, {op, startSeq, endSeq} in a v3 log.
func spellFor(h wire.Header, batch []session.Event) {
	want := session.SpellingV3
	if h.Version == wire.FormatVersionV0 {
		want = session.SpellingV0
	}
	for i := range batch {
		if op := batch[i].SurfaceOp; op != nil {
			op.Spelling = want
		}
	}
}

// checkFormatRules applies the rules a log's format adds to the envelope
// (FORMAT.md §8.1, §8.2): a replace surface operation is spelled as its
// format spells it, and a v0 log, the published harness's, holds only the
// harness's event types (or ignorable events).
func checkFormatRules(h wire.Header, events []session.Event) error {
	v0 := h.Version == wire.FormatVersionV0
	for _, e := range events {
		if op := e.SurfaceOp; op != nil && op.Op == session.SurfaceReplace {
			if v0 && op.Spelling != session.SpellingV0 {
				return fmt.Errorf("event at seq %d: a v0 log spells a replace surfaceOp {op:\"replace\", start, end}", e.Seq)
			}
			if !v0 && op.Spelling != session.SpellingV3 {
				return fmt.Errorf("event at seq %d: a v3 log spells a replace surfaceOp {op:\"replace\", startSeq, endSeq}", e.Seq)
			}
		}
	}
	return nil
}

// harnessUpgrade applies to the events of a v0 log, in place, the first
// step of the published harness's load after its scan (FORMAT.md §8.2):
// events in a shape older harnesses wrote are upgraded to the current shape
// (the log file keeps them as written), and every event passes the
// harness's per-event checks (session.HarnessUpgrader). events and then
// recovered are one log.
func harnessUpgrade(id string, events, recovered []session.Event) error {
	up := session.HarnessUpgrader{SessionID: id}
	for _, evs := range [][]session.Event{events, recovered} {
		for i := range evs {
			e, err := up.Upgrade(evs[i])
			if err != nil {
				return err
			}
			evs[i] = e
		}
	}
	return nil
}

// harnessFold applies the last step of the harness's load to a v0 log: the
// whole log folds into a valid surface (session.Surface), and only the
// harness's three surface types carry surface metadata.
func harnessFold(events, recovered []session.Event) error {
	var surface session.Surface
	for _, evs := range [][]session.Event{events, recovered} {
		for _, e := range evs {
			if (e.SurfaceOp != nil || e.SourceEventSeqs != nil) && !session.HarnessSurfaceEligible(e.Type) {
				return fmt.Errorf("event at seq %d: %q events cannot join the harness's surface (surfaceOp, sourceEventSeqs)", e.Seq, e.Type)
			}
			if err := surface.Next(e); err != nil {
				return fmt.Errorf("event at seq %d: %w", e.Seq, err)
			}
		}
	}
	return nil
}

// checkHarnessBatch refuses, as InvalidArgument, a batch that would make a
// v0 log one the harness's load refuses: an event that fails the harness's
// per-event checks, or one the surface fold of the log refuses.
func (s *Store) checkHarnessBatch(st *handleState, batch []session.Event) error {
	id := st.ref.SessionID
	for i, e := range batch {
		if err := session.CheckHarnessEvent(e); err != nil {
			return invalidArgument(id, fmt.Errorf("%w at index %d (seq %d, type %q): the harness would refuse this v0 log: %w",
				session.ErrInvalidEvent, i, e.Seq, e.Type, err))
		}
	}
	var stored []session.Event
	if st.materialized || st.primed != nil {
		var err error
		if stored, err = s.storedEvents(st); err != nil {
			return err
		}
	}
	if err := harnessFold(stored, batch); err != nil {
		return invalidArgument(id, fmt.Errorf("%w: the harness would refuse this v0 log: %w", session.ErrInvalidEvent, err))
	}
	return nil
}
