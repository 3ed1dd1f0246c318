package workflows

import (
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/wire"
)

// SessionLoopWorkflow is the SessionLoop workflow as registered with a
// worker: it decodes its input strictly (see decodeRequest) and runs
// SessionLoop. An input that does not decode fails the run with a
// non-retryable InvalidArgument.
func SessionLoopWorkflow(ctx workflow.Context, in converter.RawValue) (wire.LoopDescription, error) {
	var req wire.SessionLoopInput
	if err := decodeRequest(wire.SessionLoopName, in, &req); err != nil {
		return wire.LoopDescription{}, err
	}
	return SessionLoop(ctx, req)
}

// validateStartPayload is the Start validator over the raw request; it
// keeps the request it accepts for the handler.
func (lp *loop) validateStartPayload(ctx workflow.Context, in converter.RawValue) error {
	var req StartRequest
	if err := decodeRequest(wire.UpdateStart, in, &req); err != nil {
		return err
	}
	if err := lp.validateStart(req); err != nil {
		return err
	}
	lp.starts.keep(ctx, req)
	return nil
}

// handleStartPayload is the Start handler over the raw request: the one
// the validator kept, or decoded here where the validator did not run in
// this process (a replay).
func (lp *loop) handleStartPayload(ctx workflow.Context, in converter.RawValue) (wire.StartResult, error) {
	req, err := lp.starts.take(ctx, wire.UpdateStart, in)
	if err != nil {
		return wire.StartResult{}, err
	}
	return lp.handleStart(ctx, req)
}
