package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/agent"
)

// closeCallsChange names the versioned change that closes the tool calls a
// step leaves without a result (D40): a max-tokens step's calls (at the
// turn's end through EndTurn, or before the next step through CloseCalls)
// and the calls of a step whose tool activity failed (through EndTurn).
const closeCallsChange = "close-unresolved-calls"

// closesCalls reports whether this run closes a step's unresolved calls,
// recording the version marker the first time it is asked.
func (l *lifecycle) closesCalls() bool {
	return workflow.GetVersion(l.dctx, closeCallsChange, workflow.DefaultVersion, 1) >= 1
}

// closeCalls stores the closing of the calls of the assistant/message at
// msgSeq that have no result (CloseCalls), before the step ends and the
// next one opens.
func (l *lifecycle) closeCalls(turn, msgSeq int64, maxTokens bool) error {
	var res agent.CloseCallsResult
	err := workflow.ExecuteActivity(l.storeCtx(l.dctx), agent.CloseCallsActivity,
		agent.CloseCallsInput{Ref: *l.ref, Turn: turn, MessageSeq: msgSeq, MaxTokens: maxTokens}).Get(l.dctx, &res)
	if err != nil {
		return unwrapActivity(err)
	}
	l.nextSeq = max(l.nextSeq, res.NextSeq)
	return nil
}
