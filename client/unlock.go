package client

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/sessionflow/sessionflow/jsonl"
)

// Unlock forfeits the write lease of session id in store after checking
// through Temporal that its owner is gone (SPEC 0.2): it reads the lease,
// looks up the owning workflow id without a run id (continue-as-new changes
// the run id while the same workflow keeps the lease) and refuses with
// ErrOwnerRunning while an execution of it runs, or with ErrOwnerUnknown
// when the lease names no workflow or cannot be read (an empty or damaged
// lease file names no owner: only a forced unlock, jsonl.Store.ForceUnlock,
// removes it). Otherwise the checked lease is released
// as a forfeit does: its handle id is revoked, the lease removed and a
// session never written erased; a lease taken by another handle in between
// is left alone (ErrLeaseChanged).
//
// It returns the removed lease, or nil when no lease was held.
func (c *Client) Unlock(ctx context.Context, store *jsonl.Store, id string) (*jsonl.Lease, error) {
	lease, err := store.LeaseOf(ctx, id)
	if errors.Is(err, jsonl.ErrCorrupt) {
		return nil, &Error{Type: TypeOwnerUnknown, SessionID: id, Err: err,
			Message: fmt.Sprintf("session %q: its lease cannot be read (%v), so Temporal cannot tell whether its owner is gone; once the owner is known to be gone, remove the lease with a forced unlock (jsonl.Store.ForceUnlock, starter unlock --force)", id, err)}
	}
	if err != nil || lease == nil {
		return nil, err
	}
	owner := lease.Owner
	if owner.WorkflowID == "" {
		return nil, &Error{Type: TypeOwnerUnknown, SessionID: id,
			Message: fmt.Sprintf("session %q: the lease of handle %q names no owning workflow, so Temporal cannot tell whether its owner is gone", id, lease.Handle)}
	}
	resp, err := c.c.DescribeWorkflowExecution(ctx, owner.WorkflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		// No execution of the owner is known: it is gone.
	case err != nil:
		return nil, fmt.Errorf("look up the owner %q of session %q: %w", owner.WorkflowID, id, err)
	case resp.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		return nil, &Error{Type: TypeOwnerRunning, SessionID: id,
			Message: fmt.Sprintf("session %q is owned by workflow %q, which is running (run %s); dispose or cancel it instead",
				id, owner.WorkflowID, resp.GetWorkflowExecutionInfo().GetExecution().GetRunId())}
	}
	// Closing the checked handle id by reference removes the lease only if it
	// still names that handle, so a lease taken after the check survives.
	ref := jsonl.HandleRef{SessionID: id, HandleID: lease.Handle, Access: jsonl.AccessWrite}
	if err := store.CloseHandle(ctx, ref); err != nil {
		return nil, fmt.Errorf("forfeit the lease of session %q: %w", id, err)
	}
	now, err := store.LeaseOf(ctx, id)
	if err != nil {
		return nil, err
	}
	if now != nil {
		return nil, &Error{Type: TypeLeaseChanged, SessionID: id,
			Message: fmt.Sprintf("session %q: the lease changed while its owner was checked (now handle %q of workflow %q); nothing was removed",
				id, now.Handle, now.Owner.WorkflowID)}
	}
	return lease, nil
}
