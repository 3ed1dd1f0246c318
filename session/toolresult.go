package session

// OutcomeUnknownResult is the tool/result crash repair writes for a call
// that was recorded by the tool/call at callSeq but has no durable result
// (FORMAT.md §5.3): isError, the TOOL_OUTCOME_UNKNOWN error and text, the
// message id "interrupted-tool-result-<callId>-<seq>" and sourceEventSeqs
// [callSeq]. A live loop that finds such a call on retry stores exactly
// this event, so that a log it closes reads as one resume would close.
func OutcomeUnknownResult(turn, step int64, callID string, callSeq, seq, time int64) (Event, error) {
	return interruptedToolResult(turn, PendingCall{CallID: callID, Step: step, CallSeq: callSeq}, seq, time)
}
