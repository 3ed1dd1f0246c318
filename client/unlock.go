package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/jsonl"
)

// Unlock forfeits the write lease of session id in store (a *jsonl.Store,
// or any activities.LeaseStore) after checking through Temporal that its
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
func (c *Client) Unlock(ctx context.Context, store activities.LeaseStore, id string) (*jsonl.Lease, error) {
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
			Message: fmt.Sprintf("session %q: the lease of handle %q names no owning workflow, so Temporal cannot tell whether its owner is gone", id, lease.HandleID)}
	}
	// The operator path: a workflow id Temporal does not know (Unknown)
	// counts as gone, as it always did for unlock.
	st, err := activities.LookupOwner(ctx, c.c, owner, jsonl.Owner{})
	if err != nil {
		return nil, fmt.Errorf("look up the owner %q of session %q: %w", owner.WorkflowID, id, err)
	}
	if st.State == activities.OwnerRunning {
		return nil, &Error{Type: TypeOwnerRunning, SessionID: id,
			Message: fmt.Sprintf("session %q is owned by workflow %q, which is running (run %s); dispose or cancel it instead",
				id, owner.WorkflowID, st.RunID)}
	}
	// Closing the checked handle id by reference removes the lease only if it
	// still names that handle, so a lease taken after the check survives.
	if err := activities.ForfeitLease(ctx, store, id, lease); err != nil {
		var changed *activities.LeaseChangedError
		if errors.As(err, &changed) {
			return nil, &Error{Type: TypeLeaseChanged, SessionID: id, Message: changed.Error(), Err: err}
		}
		return nil, err
	}
	return lease, nil
}
