package client

import (
	"context"
	"errors"
	"fmt"

	temporalclient "go.temporal.io/sdk/client"

	enumspb "go.temporal.io/api/enums/v1"

	"go.temporal.io/api/serviceerror"

	"github.com/sessionflow/sessionflow/wire"
)

// Unlock forfeits the write lease of session id in store (a *jsonl.Store,
// or any wire.LeaseStore) after checking through Temporal that its
// owner is gone (LIFECYCLE.md §8.2): it reads
// the lease, looks up the owning workflow id without a run id (continue-as-new changes
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
func (c *Client) Unlock(ctx context.Context, store wire.LeaseStore, id string) (*wire.Lease, error) {
	lease, err := store.LeaseOf(ctx, id)
	if errors.Is(err, wire.ErrCorrupt) {
		return nil, &Error{Type: TypeOwnerUnknown, SessionID: id, Err: err,
			Message: fmt.Sprintf("session %q: its lease cannot be read (%v), so Temporal cannot tell whether its owner is gone; once the owner is known to be gone, remove the lease with a forced unlock (jsonl.Store.ForceUnlock, starter unlock --force)", id, err)}
	}
	if err != nil || lease == nil {
		return nil, err
	}
	owner := lease.Owner
	if owner.WorkflowID == "" {
		return nil, &Error{Type: TypeOwnerUnknown, SessionID: id,
			Message: fmt.Sprintf("session %q: the lease of handle %q names no owning workflow, so Temporal cannot tell whether its owner is gone", id, lease.HandleID)}
	}
	// The operator path of the owner lookup (the ForfeitDeadOwner
	// activity's, without a calling workflow): the owning workflow id is
	// looked up without a run id, as continue-as-new changes the run while
	// the same workflow keeps the lease, and a workflow id Temporal does
	// not know counts as gone, as it always did for unlock.
	running, err := ownerRun(ctx, c.c, owner.WorkflowID)
	if err != nil {
		return nil, fmt.Errorf("look up the owner %q of session %q: %w", owner.WorkflowID, id, err)
	}
	if running != "" {
		return nil, &Error{Type: TypeOwnerRunning, SessionID: id,
			Message: fmt.Sprintf("session %q is owned by workflow %q, which is running (run %s); dispose or cancel it instead",
				id, owner.WorkflowID, running)}
	}
	// Closing the checked handle id by reference removes the lease only if it
	// still names that handle, so a lease taken after the check survives.
	if err := wire.ForfeitLease(ctx, store, id, lease); err != nil {
		var changed *wire.LeaseChangedError
		if errors.As(err, &changed) {
			return nil, &Error{Type: TypeLeaseChanged, SessionID: id, Message: changed.Error(), Err: err}
		}
		return nil, err
	}
	return lease, nil
}

// ownerRun returns the run id of the running execution of workflowID, ""
// when none runs or Temporal knows none; a failed lookup returns
// Temporal's error.
func ownerRun(ctx context.Context, tc temporalclient.Client, workflowID string) (string, error) {
	desc, err := tc.DescribeWorkflow(ctx, workflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return "", nil
	case err != nil:
		return "", err
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return "", nil
	}
	return info.GetExecution().GetRunId(), nil
}
