package bench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// filler is the text conversations are made of.
const filler = "The quick brown fox jumps over the lazy dog while the session log keeps every word. "

// messageText returns the text of message i of a built conversation:
// exactly size bytes (at least its numbered prefix).
func messageText(i, size int) string {
	p := "message " + strconv.Itoa(i) + ": "
	if size <= len(p) {
		return p
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString(p)
	for b.Len() < size {
		n := min(len(filler), size-b.Len())
		b.WriteString(filler[:n])
	}
	return b.String()
}

// Conversation returns n messages of size text bytes each, alternating user
// and assistant, starting with a user message: the conversation a sample
// workflow starts with, and the one WriteConversationLog stores.
func Conversation(n, size int) []provider.Message {
	out := make([]provider.Message, n)
	for i := range out {
		role := provider.RoleUser
		if i%2 == 1 {
			role = provider.RoleAssistant
		}
		out[i] = provider.Message{Role: role, Content: []provider.Block{{Type: provider.BlockText, Text: messageText(i, size)}}}
	}
	return out
}

// conversationEvents returns the events of exchange k (0-based) of a built
// conversation from seq: a completed turn holding messages 2k and 2k+1, or
// only 2k when last is set and n is odd.
func conversationEvents(seq int64, k, n, size int, model string) ([]session.Event, error) {
	turn := int64(k + 1)
	t := int64(1_700_000_000_000) + seq
	var out []session.Event
	add := func(typ string, data any, surface bool) error {
		ev, err := session.NewEvent(typ, seq+int64(len(out)), t, data)
		if err != nil {
			return fmt.Errorf("building %s: %w", typ, err)
		}
		if surface {
			ev.SurfaceOp = session.AppendOp()
		}
		out = append(out, ev)
		return nil
	}
	text := func(i int) []map[string]any {
		return []map[string]any{{"type": provider.BlockText, "text": messageText(i, size)}}
	}
	if err := add(wire.TypeTurnStart, wire.TurnStart{Turn: turn}, false); err != nil {
		return nil, err
	}
	if err := add(wire.TypeUserMessage, map[string]any{"id": fmt.Sprintf("u%d", 2*k), "role": "user", "content": text(2 * k), "source": map[string]any{"kind": "user"}}, true); err != nil {
		return nil, err
	}
	if 2*k+1 < n {
		if err := add(wire.TypeStepStart, wire.StepStart{Turn: turn, Step: 1}, false); err != nil {
			return nil, err
		}
		msg := map[string]any{"id": fmt.Sprintf("a%d", 2*k+1), "role": "assistant", "content": text(2*k + 1),
			"source": map[string]any{"kind": "model", "provider": "scripted", "model": model}}
		if err := add(wire.TypeAssistantMessage, map[string]any{"turn": turn, "step": 1, "message": msg, "stream": []any{}}, true); err != nil {
			return nil, err
		}
		if err := add(wire.TypeStepEnd, wire.StepEnd{Turn: turn, Step: 1}, false); err != nil {
			return nil, err
		}
	}
	if err := add(wire.TypeTurnEnd, wire.TurnEnd{Turn: turn, Reason: wire.TurnEndReason{Kind: wire.TurnEndCompleted}}, false); err != nil {
		return nil, err
	}
	return out, nil
}

// WriteConversationLog stores session id in st (a raw root) holding a
// conversation of n messages of size text bytes each (Conversation(n,
// size)), as completed turns of one user message and one answer, writing
// the event lines directly after the header the store wrote. It returns
// the log's next seq and size.
func WriteConversationLog(ctx context.Context, st *jsonl.Store, id string, n, size int, model string) (next, bytes int64, err error) {
	hdr := wire.Header{Version: wire.FormatVersion, ID: id, CreatedAt: 1, Cwd: "/bench"}
	h, err := st.Create(ctx, hdr, jsonl.CreateOptions{HandleID: "bench-" + id})
	if err != nil {
		return 0, 0, fmt.Errorf("creating %s: %w", id, err)
	}
	if err := h.Flush(ctx); err != nil {
		return 0, 0, fmt.Errorf("writing the header of %s: %w", id, err)
	}
	if err := h.Close(ctx); err != nil {
		return 0, 0, fmt.Errorf("closing %s: %w", id, err)
	}
	snap, err := st.Stat(ctx, id)
	if err != nil || snap == nil {
		return 0, 0, fmt.Errorf("locating %s: %v", id, err)
	}
	f, err := os.OpenFile(snap.Path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("opening %s: %w", snap.Path, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing %s: %w", snap.Path, cerr)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	for k := 0; 2*k < n; k++ {
		evs, err := conversationEvents(next, k, n, size, model)
		if err != nil {
			return 0, 0, err
		}
		for _, ev := range evs {
			line, err := ev.MarshalJSON()
			if err != nil {
				return 0, 0, fmt.Errorf("encoding seq %d: %w", ev.Seq, err)
			}
			if _, err := w.Write(append(line, '\n')); err != nil {
				return 0, 0, fmt.Errorf("writing %s: %w", snap.Path, err)
			}
		}
		next += int64(len(evs))
	}
	if err := w.Flush(); err != nil {
		return 0, 0, fmt.Errorf("writing %s: %w", snap.Path, err)
	}
	if err := f.Sync(); err != nil {
		return 0, 0, fmt.Errorf("syncing %s: %w", snap.Path, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("sizing %s: %w", snap.Path, err)
	}
	return next, fi.Size(), nil
}
