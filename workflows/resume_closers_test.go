package workflows_test

// The closers a resume stores for an interrupted tool step (FORMAT.md
// §5.3), run through the resume workflow and its real activities.

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/testsuite/sessiontest"
	"github.com/sessionflow/sessionflow/wire"
)

// An open turn whose assistant message asked for two tools, of which only
// the first was recorded as started (tool/call): resume stores a
// TOOL_OUTCOME_UNKNOWN result for the recorded call, a TOOL_NOT_STARTED
// result for the unrecorded one, then step/end, turn/end{interrupted} and
// the marker, in one repair.
func TestResumeClosesRecordedAndUnrecordedToolCalls(t *testing.T) {
	st := sessiontest.NewStore(t, jsonl.CompressionZstd)
	msg := sessiontest.Ev(t, wire.TypeAssistantMessage, 2, map[string]any{
		"turn": 1, "step": 1, "stream": []any{},
		"message": map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "tool-call", "id": "call-1", "name": "read", "arguments": map[string]any{}},
			map[string]any{"type": "tool-call", "id": "call-2", "name": "write", "arguments": map[string]any{}},
		}},
	})
	msg.SurfaceOp = session.AppendOp()
	sessiontest.WriteStored(t, st, wire.Header{ID: "tns", CreatedAt: 1}, 0, []session.Event{
		sessiontest.TurnStart(t, 0, 1),
		sessiontest.Ev(t, wire.TypeStepStart, 1, map[string]any{"turn": 1, "step": 1}),
		msg,
		sessiontest.Ev(t, wire.TypeToolCall, 3, map[string]any{"turn": 1, "step": 1, "callId": "call-1", "name": "read", "arguments": "{}"}),
	})
	info, h := sessiontest.ResumeAndDispose(t, st, "tns")
	require.Equal(t, int64(9), info.NextSeq)
	require.Equal(t, 1, h.Count(wire.RepairName))
	evs := sessiontest.Stored(t, st, "tns")
	sessiontest.RequireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "tool/call", "tool/result", "tool/result", "step/end", "turn/end", "session/end-seed"}, sessiontest.Types(evs))

	unknown, err := evs[4].ToolResult()
	require.NoError(t, err)
	require.Equal(t, []int64{3}, evs[4].SourceEventSeqs)
	require.Equal(t, "call-1", unknown.Message.Source.CallID)
	require.Equal(t, "TOOL_OUTCOME_UNKNOWN", unknown.Error.Code)
	require.Equal(t, "ToolOutcomeUnknownError", unknown.Error.Name)

	notStarted, err := evs[5].ToolResult()
	require.NoError(t, err)
	require.Empty(t, evs[5].SourceEventSeqs, "an unrecorded call has no tool/call to point at")
	require.Equal(t, "call-2", notStarted.Message.Source.CallID)
	require.Equal(t, "TOOL_NOT_STARTED", notStarted.Error.Code)
	require.Equal(t, "ToolNotStartedError", notStarted.Error.Name)
	require.Equal(t, "interrupted-tool-result-call-2-5", notStarted.Message.ID)
	require.Len(t, notStarted.Message.Content, 1)
	require.Equal(t, "call-2", notStarted.Message.Content[0].ToolCallID)
	require.True(t, notStarted.Message.Content[0].IsError)
	require.Equal(t, []wire.TextContent{{Type: "text", Text: "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."}},
		notStarted.Message.Content[0].Content)

	se, err := evs[6].StepEnd()
	require.NoError(t, err)
	require.Equal(t, int64(1), se.Step)
	te, err := evs[7].TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "interrupted", string(te.Reason.Kind))
}

// An open turn whose only tool call was never recorded: the result is
// TOOL_NOT_STARTED.
func TestResumeClosesUnrecordedToolCall(t *testing.T) {
	st := sessiontest.NewStore(t, jsonl.CompressionNone)
	msg := sessiontest.Ev(t, wire.TypeAssistantMessage, 2, map[string]any{
		"turn": 1, "step": 1, "stream": []any{},
		"message": map[string]any{"role": "assistant", "content": []any{
			map[string]any{"type": "tool-call", "id": "call-9", "name": "read", "arguments": map[string]any{}},
		}},
	})
	msg.SurfaceOp = session.AppendOp()
	sessiontest.WriteStored(t, st, wire.Header{ID: "tns1", CreatedAt: 1}, 0, []session.Event{
		sessiontest.TurnStart(t, 0, 1),
		sessiontest.Ev(t, wire.TypeStepStart, 1, map[string]any{"turn": 1, "step": 1}),
		msg,
	})
	sessiontest.ResumeAndDispose(t, st, "tns1")
	evs := sessiontest.Stored(t, st, "tns1")
	sessiontest.RequireContiguous(t, evs)
	require.Equal(t, []string{"turn/start", "step/start", "assistant/message", "tool/result", "step/end", "turn/end", "session/end-seed"}, sessiontest.Types(evs))
	tr, err := evs[3].ToolResult()
	require.NoError(t, err)
	require.Equal(t, "TOOL_NOT_STARTED", tr.Error.Code)
	require.Empty(t, evs[3].SourceEventSeqs)
}
