package activities

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// OwnerState is what Temporal reports about the workflow a lease names.
type OwnerState int

const (
	// OwnerGone: no execution of the owning workflow runs.
	OwnerGone OwnerState = iota
	// OwnerRunning: an execution of the owning workflow id runs (it may be
	// a later run of a continue-as-new chain: the lease keeps the run id
	// it was taken with).
	OwnerRunning
	// OwnerUnknown: Temporal cannot tell. The lease names no workflow,
	// Temporal knows no execution of its workflow id (a lease taken by a
	// command-line tool, or a run past retention), or the only running
	// execution is the caller's own and Temporal does not know the lease's
	// run (it may live in another namespace).
	OwnerUnknown
)

// OwnerStatus is the outcome of LookupOwner.
type OwnerStatus struct {
	// State classifies the owner.
	State OwnerState
	// RunID is the running execution's run id when State is OwnerRunning.
	RunID string
}

// LookupOwner asks Temporal whether the workflow owner names still runs
// (LIFECYCLE.md §8.1). It looks up the owner's workflow id without a run id first,
// because continue-as-new changes the run while the same workflow keeps the
// lease. self is the caller's own execution when the caller is a workflow
// running under the same workflow id (a resume of the session): Temporal
// runs one execution per workflow id, so when the latest execution is self,
// the lease's run (if Temporal knows it in this namespace) is closed. Pass
// the zero Owner otherwise. A failed lookup returns Temporal's error as is.
func LookupOwner(ctx context.Context, tc sdkclient.Client, owner, self jsonl.Owner) (OwnerStatus, error) {
	if owner.WorkflowID == "" {
		return OwnerStatus{State: OwnerUnknown}, nil
	}
	desc, err := tc.DescribeWorkflow(ctx, owner.WorkflowID, "")
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		return OwnerStatus{State: OwnerUnknown}, nil
	case err != nil:
		return OwnerStatus{}, err
	}
	info := desc.RawResponse.GetWorkflowExecutionInfo()
	latest := info.GetExecution().GetRunId()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
		return OwnerStatus{State: OwnerGone}, nil
	}
	if self.RunID == "" || latest != self.RunID || owner.WorkflowID != self.WorkflowID {
		return OwnerStatus{State: OwnerRunning, RunID: latest}, nil
	}
	// The running execution is the caller. The lease's run is closed if
	// Temporal knows it here; otherwise it may belong to another namespace.
	if owner.RunID == "" || owner.RunID == self.RunID {
		return OwnerStatus{State: OwnerUnknown}, nil
	}
	_, err = tc.DescribeWorkflow(ctx, owner.WorkflowID, owner.RunID)
	switch {
	case errors.As(err, &nf):
		return OwnerStatus{State: OwnerUnknown}, nil
	case err != nil:
		return OwnerStatus{}, err
	}
	return OwnerStatus{State: OwnerGone}, nil
}

var _ wire.LeaseStore = (*jsonl.Store)(nil)

// ForfeitInput is the input of ForfeitDeadOwner.
type ForfeitInput struct {
	// SessionID is the session whose lease is checked.
	SessionID string `json:"sessionId"`
	// Self is the calling workflow execution (the resume).
	Self jsonl.Owner `json:"self"`
}

// ForfeitResult is the output of ForfeitDeadOwner.
type ForfeitResult struct {
	// Forfeited is the lease removed, absent when no lease was held any
	// more.
	Forfeited *wire.Lease `json:"forfeited,omitempty"`
}

// ForfeitDeadOwner forfeits the session's write lease when Temporal reports
// its owning workflow closed (LookupOwner with the caller as self); the
// resume then opens the session. A running owner, or one Temporal cannot
// check, keeps the lease and fails the activity with a non-retryable
// SessionAlreadyOwned error that names the owner and the way out. A worker
// whose activities have no Temporal client fails it the same way. No lease
// at all is a success with nothing forfeited.
func (a *Activities) ForfeitDeadOwner(ctx context.Context, in ForfeitInput) (ForfeitResult, error) {
	store, err := a.store()
	if err != nil {
		return ForfeitResult{}, temporal.NewNonRetryableApplicationError(PersistenceNotConfiguredText, wire.ErrTypePersistenceNotConfigured, nil)
	}
	lease, err := store.LeaseOf(ctx, in.SessionID)
	if errors.Is(err, wire.ErrCorrupt) {
		// An empty or damaged lease names no owner Temporal could check.
		msg := fmt.Sprintf("session %q is already owned by an active write handle: its lease cannot be read (%v), so Temporal cannot tell whether its owner is gone; once it is, run `starter unlock --id %q --force`",
			in.SessionID, err, in.SessionID)
		return ForfeitResult{}, temporal.NewNonRetryableApplicationError(msg, string(jsonl.CodeAlreadyOwned), nil)
	}
	if err != nil || lease == nil {
		return ForfeitResult{}, MapError(err)
	}
	owned := func(format string, args ...any) error {
		msg := fmt.Sprintf("session %q is already owned by an active write handle (handle %q of workflow %q run %q, host %q pid %d): ",
			in.SessionID, lease.HandleID, lease.Owner.WorkflowID, lease.Owner.RunID, lease.Host, lease.PID) + fmt.Sprintf(format, args...)
		return temporal.NewNonRetryableApplicationError(msg, string(jsonl.CodeAlreadyOwned), nil)
	}
	if a.Temporal == nil {
		return ForfeitResult{}, owned("this worker has no Temporal client to check the owner; once the owner is gone, run `starter unlock --id %q`", in.SessionID)
	}
	st, err := LookupOwner(ctx, a.Temporal, lease.Owner, in.Self)
	if err != nil {
		err = fmt.Errorf("look up the owner %q of session %q: %w", lease.Owner.WorkflowID, in.SessionID, err)
		return ForfeitResult{}, temporal.NewApplicationErrorWithCause(err.Error(), wire.ErrTypeIO, err)
	}
	switch st.State {
	case OwnerRunning:
		return ForfeitResult{}, owned("that workflow is running (run %s); dispose or cancel it, then resume", st.RunID)
	case OwnerUnknown:
		return ForfeitResult{}, owned("Temporal cannot tell whether that owner is gone (no such execution in this namespace); once it is, run `starter unlock --id %q --force`", in.SessionID)
	}
	if err := wire.ForfeitLease(ctx, store, in.SessionID, lease); err != nil {
		if errors.Is(err, wire.ErrLeaseChanged) {
			return ForfeitResult{}, temporal.NewNonRetryableApplicationError(err.Error(), string(jsonl.CodeAlreadyOwned), nil)
		}
		return ForfeitResult{}, MapError(err)
	}
	return ForfeitResult{Forfeited: lease}, nil
}
