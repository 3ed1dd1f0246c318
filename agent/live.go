package agent

import (
	"context"
	"log/slog"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/livetext"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/wire"
)

// startLive starts the live file of the call's attempt in the session's
// directory (package livetext), or returns nil, after a warning, when it
// cannot: the live text is a courtesy to viewers and never fails the call.
func (c *modelCall) startLive(ctx context.Context, attempt int32) *livetext.Writer {
	if c.a.NoLiveText {
		return nil
	}
	dir, err := c.h.Dir(ctx)
	if err == nil {
		var w *livetext.Writer
		if w, err = livetext.Start(dir, c.in.Turn, c.in.Step, attempt); err == nil {
			return w
		}
	}
	slog.Warn("agent: the model call's live text is not written",
		"session", c.in.Ref.SessionID, "turn", c.in.Turn, "step", c.in.Step, "error", err)
	return nil
}

// endLive ends the call's live file: its message is stored, or the
// attempt stored nothing.
func (c *modelCall) endLive(w *livetext.Writer, stored bool) {
	if err := w.End(stored); err != nil {
		slog.Warn("agent: ending the model call's live text failed",
			"session", c.in.Ref.SessionID, "turn", c.in.Turn, "step", c.in.Step, "error", err)
	}
}

// liveChunk hands a text or reasoning chunk to the live file.
func liveChunk(w *livetext.Writer, ch provider.Chunk) {
	switch ch.Type {
	case provider.ChunkText:
		w.Chunk(wire.LiveKindText, ch.Delta)
	case provider.ChunkReasoning:
		w.Chunk(wire.LiveKindReasoning, ch.Delta)
	}
}

// clearLive removes the session's live files (stale ones of a worker that
// died mid-call): the turn has ended, no call of it streams any more.
func clearLive(ctx context.Context, h *jsonl.Handle) {
	dir, err := h.Dir(ctx)
	if err == nil {
		_, err = livetext.Clear(dir)
	}
	if err != nil {
		slog.Warn("agent: removing the session's stale live text failed", "session", h.ID(), "error", err)
	}
}
