package wire

// Live text event types (LiveEvent.Event): the events a follower of a
// session's live text yields (package livetext, docs/API.md "Live text").
const (
	// LiveChunk: Text was streamed by the running model call at byte
	// Offset of its Kind's text.
	LiveChunk = "chunk"
	// LiveReset: what was shown of the call (Turn, Step) is discarded: a
	// retried attempt (Attempt) streams it again from offset 0, or the
	// attempt failed and stored nothing.
	LiveReset = "reset"
	// LiveEnd: the call's message is stored (read it from the log); no more
	// text of this call follows.
	LiveEnd = "end"
)

// Live text kinds (LiveEvent.Kind).
const (
	// LiveKindText is the answer's text.
	LiveKindText = "text"
	// LiveKindReasoning is the model's reasoning.
	LiveKindReasoning = "reasoning"
)

// LiveEvent is one event of a session's live text: the text the running
// model call streams, read from the store beside the log, not from the log
// (it is not durable: docs/FORMAT.md "Live text"). Offsets count bytes of
// one Kind's text of one attempt from 0; a follower that has shown text up
// to an offset drops what it already showed, and a larger Offset than it
// reached is a gap (chunks the writer dropped).
type LiveEvent struct {
	// Event is LiveChunk, LiveReset or LiveEnd.
	Event string `json:"event"`
	// Turn, Step and Attempt name the model call (Attempt is its activity
	// attempt, 1 for the first).
	Turn    int64 `json:"turn"`
	Step    int64 `json:"step"`
	Attempt int32 `json:"attempt"`
	// Offset, Text and Kind are a chunk's.
	Offset int64  `json:"offset,omitempty"`
	Text   string `json:"text,omitempty"`
	Kind   string `json:"kind,omitempty"`
}
