package workflows

import (
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"
)

// SessionLoopWorkflow is the SessionLoop workflow as registered with a
// worker: it decodes its input strictly (see decodeRequest) and runs
// SessionLoop. An input that does not decode fails the run with a
// non-retryable InvalidArgument.
func SessionLoopWorkflow(ctx workflow.Context, in converter.RawValue) (LoopDescription, error) {
	var req SessionLoopInput
	if err := decodeRequest(SessionLoopName, in, &req); err != nil {
		return LoopDescription{}, err
	}
	return SessionLoop(ctx, req)
}

// validateStartPayload is the Start validator over the raw request.
func (lp *loop) validateStartPayload(in converter.RawValue) error {
	var req StartRequest
	if err := decodeRequest(UpdateStart, in, &req); err != nil {
		return err
	}
	return lp.validateStart(req)
}

// handleStartPayload is the Start handler over the raw request (decoded
// again: validators do not run on replay, and Start is rare).
func (lp *loop) handleStartPayload(ctx workflow.Context, in converter.RawValue) (StartResult, error) {
	var req StartRequest
	if err := decodeRequest(UpdateStart, in, &req); err != nil {
		return StartResult{}, err
	}
	return lp.handleStart(ctx, req)
}
