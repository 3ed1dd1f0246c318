package agent

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// storedModelCall is what CallModel reads back from a stored message.
type storedModelCall struct {
	seq         int64
	calls       []CallRef
	finish      provider.FinishReason
	usage       *provider.Usage
	interrupted bool
	// recorded is the number of the first calls whose tool/call follows
	// the message, in model order (ModelResult.RecordedCalls).
	recorded int
}

// modelCall is one attempt of CallModel: its activities, the session's
// write handle and the input, and what it read of the log.
type modelCall struct {
	a  *Activities
	h  *jsonl.Handle
	in ModelInput
	// read holds the events the conversation was read from (from in.From):
	// the message is stored only into a log that still continues them.
	read []session.Event
	// seqs are the seqs of the conversation's messages.
	seqs []int64
	// window is the route's context window (0: unknown).
	window int64
}

// find returns the assistant/message of the call's (turn, step) in tail:
// the first one after the last step/start of that step.
func (c *modelCall) find(tail []session.Event) (*storedModelCall, error) {
	turn, step := c.in.Turn, c.in.Step
	start := -1
	for i := len(tail) - 1; i >= 0; i-- {
		if tail[i].Type != wire.TypeStepStart {
			continue
		}
		ss, err := tail[i].StepStart()
		if err != nil {
			return nil, err
		}
		if ss.Turn == turn && ss.Step == step {
			start = i
			break
		}
	}
	if start < 0 {
		return nil, nil
	}
	for _, e := range tail[start+1:] {
		if e.Type != wire.TypeAssistantMessage {
			continue
		}
		m, err := e.AssistantMessage()
		if err != nil {
			return nil, err
		}
		if m.Turn != turn || m.Step != step {
			continue
		}
		out := &storedModelCall{seq: e.Seq, interrupted: m.Interrupted}
		for _, tc := range m.ToolCalls() {
			t, _ := c.a.lookup(tc.Name)
			args, _ := argumentsText(tc.Arguments)
			out.calls = append(out.calls, CallRef{ID: tc.ID, Name: tc.Name, Parallel: t.Parallel, Hint: CallHint(args)})
		}
		if len(m.Usage) > 0 {
			var u provider.Usage
			if json.Unmarshal(m.Usage, &u) == nil {
				out.usage = &u
			}
		}
		out.finish = citedFinish(tail, e.SourceEventSeqs)
		if out.finish == "" {
			out.finish = streamFinish(m.Stream)
		}
		if out.finish == "" && !m.Interrupted {
			out.finish = provider.FinishStop
			if len(out.calls) > 0 {
				out.finish = provider.FinishToolCalls
			}
		}
		if recordsCalls(c.in, m.Interrupted, out.finish) {
			if n := firstGroup(out.calls, c.in.ParallelLimit); callsFollow(tail, e.Seq, out.calls[:n]) {
				out.recorded = n
			}
		}
		return out, nil
	}
	return nil, nil
}

// citedFinish reads the finish reason from the finish chunk among the
// assistant/chunk events of tail a message cites (seqs): "" when it cites
// none, or one of a reason this package does not know.
func citedFinish(tail []session.Event, seqs []int64) provider.FinishReason {
	if len(tail) == 0 {
		return ""
	}
	for i := len(seqs) - 1; i >= 0; i-- {
		at := seqs[i] - tail[0].Seq
		if at < 0 || at >= int64(len(tail)) || tail[at].Type != wire.TypeAssistantChunk {
			continue
		}
		var d struct {
			Chunk struct {
				Type   string `json:"type"`
				Reason struct {
					Kind provider.FinishReason `json:"kind"`
				} `json:"reason"`
			} `json:"chunk"`
		}
		if json.Unmarshal(tail[at].Data, &d) != nil || d.Chunk.Type != provider.RecordFinish {
			continue
		}
		switch k := d.Chunk.Reason.Kind; k {
		case provider.FinishStop, provider.FinishToolCalls, provider.FinishMaxTokens:
			return k
		}
		return ""
	}
	return ""
}

// streamFinish reads the finish reason from the stream record of a
// message stored before its chunks were (assistant/message.stream,
// docs/FORMAT.md §1.2 "The stream record").
func streamFinish(stream json.RawMessage) provider.FinishReason {
	var recs []struct {
		Type  string `json:"type"`
		Chunk struct {
			Type   provider.ChunkType    `json:"type"`
			Finish provider.FinishReason `json:"finish"`
		} `json:"chunk"`
	}
	if json.Unmarshal(stream, &recs) != nil {
		return ""
	}
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].Type == "chunk" && recs[i].Chunk.Type == provider.ChunkFinish {
			return recs[i].Chunk.Finish
		}
	}
	return ""
}

func (c *storedModelCall) result(next int64, reused bool) ModelResult {
	return ModelResult{MessageSeq: c.seq, NextSeq: next, ToolCalls: c.calls, Finish: c.finish, Usage: c.usage, Interrupted: c.interrupted, Reused: reused, RecordedCalls: c.recorded}
}

// callsFollow reports whether the events of tail right after the message
// at seq msgSeq are the tool/call events of calls, in their order.
func callsFollow(tail []session.Event, msgSeq int64, calls []CallRef) bool {
	if len(calls) == 0 || len(tail) == 0 {
		return false
	}
	at := msgSeq - tail[0].Seq + 1
	if at < 1 || at+int64(len(calls)) > int64(len(tail)) {
		return false
	}
	for i, c := range calls {
		e := tail[at+int64(i)]
		if e.Type != wire.TypeToolCall {
			return false
		}
		tc, err := e.ToolCall()
		if err != nil || tc.CallID != c.ID {
			return false
		}
	}
	return true
}

// conversation reads the log from in.From (jsonl.Handle.Tail: under the
// session's lock only while the store refreshes its view) and, with no lock
// held, returns the step's stored message when an earlier attempt stored it,
// or else the conversation to send, decoded through the activities' cache;
// and the log's next seq. Appends of the session's other operations proceed
// while it decodes.
func (c *modelCall) conversation(ctx context.Context) (*storedModelCall, []provider.Message, int64, error) {
	tail, next, err := c.h.Tail(ctx, c.in.From)
	if err != nil {
		return nil, nil, 0, activities.MapError(err)
	}
	c.read = tail
	found, err := c.find(tail)
	if err != nil || found != nil {
		return found, nil, next, activities.MapError(err)
	}
	messages, seqs, err := c.a.conversations.conversationSeqs(c.a.Runtime.Store, c.in.Ref.SessionID, tail)
	c.seqs = seqs
	if err != nil {
		// The log will read the same on every attempt.
		return nil, nil, 0, invalidLog("%v", err)
	}
	messages, next, err = c.projectContext(ctx, messages, next)
	if err != nil {
		return nil, nil, 0, err
	}
	return nil, messages, next, nil
}

// continues reports whether tail, the log from in.From read under the lock
// that appends, still begins with the events the conversation was read
// from: the same seqs, types and data.
func (c *modelCall) continues(tail []session.Event) bool {
	if len(tail) < len(c.read) {
		return false
	}
	for i, e := range c.read {
		t := tail[i]
		if t.Seq != e.Seq || t.Type != e.Type || !bytes.Equal(t.Data, e.Data) { // memequal returns at once on the same backing array
			return false
		}
	}
	return true
}
