package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/agent"
)

// closesCalls reports whether this run closes a step's unresolved calls
// (closeCallsChange), recording the version marker the first time it is
// asked.
func closesCalls(dctx workflow.Context) bool {
	return workflow.GetVersion(dctx, closeCallsChange, workflow.DefaultVersion, 1) >= 1
}

// closeCalls stores the closing of the calls of the assistant/message at
// msgSeq that have no result (CloseCalls), before the step ends and the
// next one opens.
func (t *turnRun) closeCalls(msgSeq int64, maxTokens bool) error {
	a := t.a
	var res agent.CloseCallsResult
	err := workflow.ExecuteActivity(a.set.storeCtx(a.dctx), agent.CloseCallsActivity,
		agent.CloseCallsInput{Ref: *a.log.ref, Turn: t.summary.Turn, MessageSeq: msgSeq, MaxTokens: maxTokens}).Get(a.dctx, &res)
	if err != nil {
		return unwrapActivity(err)
	}
	a.log.follow(res.NextSeq)
	return nil
}
