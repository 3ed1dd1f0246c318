package wire

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
)

// Lease is the content of a session's lease file (FORMAT.md §6.1).
type Lease struct {
	// HandleID is the id of the handle that owns the session (the
	// HandleRef.HandleID of its write handle). The lease file carries it
	// under "handleId" and, for readers of the earlier key, under "handle";
	// either is read (FORMAT.md §6.1).
	HandleID string `json:"handleId"`
	// Owner is the workflow that holds the handle.
	Owner Owner `json:"owner"`
	// Host and PID identify the process that acquired the lease.
	Host string `json:"host"`
	PID  int    `json:"pid"`
	// AcquiredAt is the acquisition time in Unix milliseconds.
	AcquiredAt int64 `json:"acquiredAt"`
	// Pending is set for a created session that has not materialized yet: it
	// carries what any worker needs to materialize it.
	Pending *PendingSession `json:"pending,omitempty"`
	// Unreadable is set, instead of the other fields, on a lease that
	// ForceUnlock removed although its content could not be decoded (an
	// empty or damaged session.lock): why it could not.
	Unreadable string `json:"-"`
}

// PendingSession is a created, never-materialized session.
type PendingSession struct {
	// Header is the header the first write will publish.
	Header Header `json:"header"`
	// InheritedEventCount is the fork cut of the session.
	InheritedEventCount int64 `json:"inheritedEventCount"`
}

// MarshalJSON writes the lease with its handle id under "handleId" and, for
// readers of the earlier key, under "handle" as well.
func (l Lease) MarshalJSON() ([]byte, error) {
	type plain Lease
	return json.Marshal(struct {
		plain
		Handle string `json:"handle"`
	}{plain(l), l.HandleID})
}

// UnmarshalJSON reads a lease, taking its handle id from "handleId" or, in
// a lease written before the rename, from "handle".
func (l *Lease) UnmarshalJSON(b []byte) error {
	type plain Lease
	var v struct {
		plain
		Handle string `json:"handle"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = Lease(v.plain)
	if l.HandleID == "" {
		l.HandleID = v.Handle
	}
	return nil
}

// ErrLeaseChanged reports that ForfeitLease found another lease than the
// one that was checked; nothing was removed.
var ErrLeaseChanged = errors.New("the lease changed while its owner was checked")

// LeaseChangedError is ForfeitLease's refusal: the lease now held.
type LeaseChangedError struct {
	// SessionID is the session.
	SessionID string
	// Now is the lease found instead of the checked one.
	Now *Lease
}

// Error names the lease found.
func (e *LeaseChangedError) Error() string {
	return fmt.Sprintf("session %q: the lease changed while its owner was checked (now handle %q of workflow %q); nothing was removed",
		e.SessionID, e.Now.HandleID, e.Now.Owner.WorkflowID)
}

// Is matches ErrLeaseChanged.
func (e *LeaseChangedError) Is(target error) bool { return target == ErrLeaseChanged }

// LeaseStore is what forfeiting a lease needs of a store: reading a
// session's lease and closing a write handle by reference. The store
// (*jsonl.Store) implements it; the client's Unlock and the ForfeitDeadOwner
// activity take it.
type LeaseStore interface {
	// LeaseOf returns the session's lease, nil when none is held.
	LeaseOf(ctx context.Context, id string) (*Lease, error)
	// CloseHandle closes a handle by reference; closing a write handle
	// revokes its id and removes the lease it holds.
	CloseHandle(ctx context.Context, ref HandleRef) error
}

// ForfeitLease releases lease, whose owner was found gone, as a forfeit
// does: the checked handle id is closed by reference (revoked, the lease
// removed, a session never written erased). A lease taken by another handle
// after the check survives, and ForfeitLease returns a *LeaseChangedError.
func ForfeitLease(ctx context.Context, store LeaseStore, id string, lease *Lease) error {
	ref := HandleRef{SessionID: id, HandleID: lease.HandleID, Access: AccessWrite}
	if err := store.CloseHandle(ctx, ref); err != nil {
		return fmt.Errorf("forfeit the lease of session %q: %w", id, err)
	}
	now, err := store.LeaseOf(ctx, id)
	if err != nil {
		return err
	}
	if now != nil {
		return &LeaseChangedError{SessionID: id, Now: now}
	}
	return nil
}
