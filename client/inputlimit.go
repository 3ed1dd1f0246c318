package client

import (
	"fmt"

	temporalclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/sessionflow/sessionflow/wire"
)

// checkUpdateInput refuses an update whose encoded input exceeds
// wire.MaxUpdateInputBytes, as an *Error of TypeInputTooLarge, before it is
// sent: the SDK echoes an update's request into the workflow's answer, and
// the server terminates a workflow whose answer exceeds its blob limit
// (docs/API.md: Update input limit). The input is encoded with the default
// data converter, the one the client's calls use.
func checkUpdateInput(opts temporalclient.UpdateWorkflowOptions) error {
	if len(opts.Args) == 0 {
		return nil
	}
	ps, err := converter.GetDefaultDataConverter().ToPayloads(opts.Args...)
	if err != nil {
		return &Error{Type: wire.ErrTypeInvalidArgument, SessionID: sessionOf(opts.WorkflowID), Err: err,
			Message: fmt.Sprintf("%s: the input cannot be encoded: %v", opts.UpdateName, err)}
	}
	size := 0
	for _, p := range ps.GetPayloads() {
		size += len(p.GetData())
	}
	if size <= wire.MaxUpdateInputBytes {
		return nil
	}
	return &Error{Type: TypeInputTooLarge, SessionID: sessionOf(opts.WorkflowID), Message: fmt.Sprintf(
		"%s input of %d bytes exceeds the update input limit of %d bytes (docs/API.md: Update input limit); nothing was sent",
		opts.UpdateName, size, wire.MaxUpdateInputBytes)}
}

// sessionOf returns the session (or loop) id of a workflow id, or the
// workflow id itself when it is not one of theirs.
func sessionOf(workflowID string) string {
	if id, err := wire.SessionIDFromWorkflowID(workflowID); err == nil {
		return id
	}
	return workflowID
}
