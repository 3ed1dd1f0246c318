package main

import (
	"context"
	"testing"

	temporalclient "go.temporal.io/sdk/client"
)

// unansweredTemporal is a Temporal client whose updates never get an
// answer: the call waits until its context ends, as with no worker running.
type unansweredTemporal struct {
	temporalclient.Client
}

func (unansweredTemporal) Close() {}

func (unansweredTemporal) UpdateWorkflow(ctx context.Context, _ temporalclient.UpdateWorkflowOptions) (temporalclient.WorkflowUpdateHandle, error) {
	<-ctx.Done()
	return nil, temporalclient.NewWorkflowUpdateServiceTimeoutOrCanceledError(ctx.Err())
}

// A live append that times out says the outcome is unknown and that the
// same batch may be retried.
func TestLiveAppendTimeoutSaysTheOutcomeIsUnknown(t *testing.T) {
	isolateEnv(t)
	stubDial(t, unansweredTemporal{})
	line := `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}` + "\n"
	r := runCLI(t, line, "append", "--id", "s1", "--timeout", "200ms")
	mustFail(t, r, 1, `append to session "s1": outcome unknown: no answer before the call ended (is a worker running?); `+
		`the batch may still be stored once a worker runs the session. Retrying the same batch is safe: `+
		`a batch already stored or already accepted is not stored twice`)
}
