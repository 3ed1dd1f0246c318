package wire

// UpdateCompact compacts a live session's conversation between turns
// (docs/API.md "Compaction"): it takes a CompactRequest and returns a
// CompactResult once the compaction has ended. Sent while a turn runs, it
// waits for the turn's end and runs before the next turn starts.
const UpdateCompact = "Compact"

// ErrTypeNoRoute is the type of the refusal of a Compact for a session
// whose agent has no model route: nothing could summarise.
const ErrTypeNoRoute = "NoRoute"

// CompactRequest is the input of the Compact update.
type CompactRequest struct {
	// CommandID names the command/run that records the request; default
	// the update's id.
	CommandID string `json:"commandId,omitempty"`
}

// CompactResult is what a Compact update returns; the log holds the
// summary.
type CompactResult struct {
	// CommandID is the command/run and command/done pair recording it.
	CommandID string `json:"commandId"`
	// Compacted reports that a summary replaced a span of the
	// conversation.
	Compacted bool `json:"compacted"`
	// CompactionID is the last compaction it ran, "" for none.
	CompactionID string `json:"compactionId,omitempty"`
	// Shadowed and ShadowedTokens count the surface nodes the summaries
	// replaced and their estimated tokens.
	Shadowed       int `json:"shadowed"`
	ShadowedTokens int `json:"shadowedTokens"`
	// Pruned counts the tool results pruned first.
	Pruned int `json:"pruned,omitempty"`
	// Tokens is the measured size of the next request after it; Window the
	// route's context window (0: unknown).
	Tokens int   `json:"tokens"`
	Window int64 `json:"window,omitempty"`
	// Text is what its command/done says, the harness's words.
	Text string `json:"text"`
	// Error is set when the compaction failed (command/done kind "error").
	Error string `json:"error,omitempty"`
}
