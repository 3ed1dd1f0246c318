package jsonl

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sessionflow/sessionflow/session"
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
	if version == session.FormatVersionV0 {
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
func parseHeaderV0(raw map[string]json.RawMessage) (session.Header, error) {
	h := session.Header{Version: session.FormatVersionV0}
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
func encodeHeaderLineV0(h session.Header, inherited int64) ([]byte, error) {
	w := headerWireV0{Type: "session", Version: session.FormatVersionV0, ID: h.ID, CreatedAt: h.CreatedAt, Cwd: h.Cwd,
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
func inheritedCount(h session.Header, events []session.Event) (int64, error) {
	if h.Version == session.FormatVersionV0 {
		return h.SeedLength, nil
	}
	return session.InheritedEventCount(events)
}

// validateInherited checks that a stored log agrees with its header's fork
// cut: in v3 through the inherited marker, in v0 by the seedLength fitting
// the log.
func validateInherited(h session.Header, events []session.Event) error {
	if h.Version == session.FormatVersionV0 {
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
func spellFor(h session.Header, batch []session.Event) {
	want := session.SpellingV3
	if h.Version == session.FormatVersionV0 {
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
func checkFormatRules(h session.Header, events []session.Event) error {
	v0 := h.Version == session.FormatVersionV0
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
