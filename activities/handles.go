package activities

import (
	"context"
	"log/slog"

	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/livetext"
	"github.com/sessionflow/sessionflow/wire"
)

// HandleInfo describes a handle that a create or open activity obtained.
type HandleInfo struct {
	// Ref identifies the handle in any process.
	Ref jsonl.HandleRef `json:"ref"`
	// Header is the session header.
	Header wire.Header `json:"header"`
	// InheritedEventCount is the fork cut of the session.
	InheritedEventCount int64 `json:"inheritedEventCount"`
	// NextSeq is the seq the next append must carry (write handles).
	NextSeq int64 `json:"nextSeq"`
	// Materialized reports whether the session has a log file.
	Materialized bool `json:"materialized"`
	// PermissionDefaults are the permission defaults of the worker that
	// ran the activity (Runtime.Permissions), nil for none: the workflow
	// takes them from its history, so a replay on a worker configured
	// otherwise decides the same.
	PermissionDefaults *PermissionDefaults `json:"permissionDefaults,omitempty"`
}

// CreateHandleInput is the input of CreateHandle.
type CreateHandleInput struct {
	// Header is the new session's header.
	Header wire.Header `json:"header"`
	// HandleID is the write handle id chosen by the workflow.
	HandleID string `json:"handleId"`
	// Owner is the owning workflow execution.
	Owner jsonl.Owner `json:"owner"`
	// InheritedEventCount is the fork cut; positive exactly when the header
	// is seeded.
	InheritedEventCount int64 `json:"inheritedEventCount,omitempty"`
}

// OpenHandleInput is the input of OpenHandle.
type OpenHandleInput struct {
	// SessionID is the session to open.
	SessionID string `json:"sessionId"`
	// Access is "read" or "write".
	Access jsonl.Access `json:"access"`
	// HandleID is the handle id chosen by the workflow (required for write).
	HandleID string `json:"handleId"`
	// Owner is the owning workflow execution (write).
	Owner jsonl.Owner `json:"owner"`
}

// HandleInput names an existing handle.
type HandleInput struct {
	// Ref is the handle.
	Ref jsonl.HandleRef `json:"ref"`
}

func infoOf(h *jsonl.Handle) HandleInfo {
	return HandleInfo{
		Ref:                 h.Ref(),
		Header:              h.Header(),
		InheritedEventCount: h.InheritedEventCount(),
		NextSeq:             h.NextSeq(),
		Materialized:        h.Materialized(),
	}
}

// CreateHandle creates a session and its write handle with the handle id the
// workflow chose (LIFECYCLE.md §4 step 3). Nothing is stored but the lease; a retry
// with the same handle id returns the same handle; a handle id closed before
// the create landed fails HandleRevoked and leaves nothing behind.
func (a *Activities) CreateHandle(ctx context.Context, in CreateHandleInput) (HandleInfo, error) {
	st, err := a.store()
	if err != nil {
		return HandleInfo{}, err
	}
	if in.HandleID == "" {
		return HandleInfo{}, MapError(invalid("create: handle id is required"))
	}
	info, err := cancellable(a.runtime(), ctx, func(ctx context.Context) (HandleInfo, error) {
		h, err := st.Create(ctx, in.Header, jsonl.CreateOptions{
			HandleID:            in.HandleID,
			Owner:               in.Owner,
			InheritedEventCount: in.InheritedEventCount,
		})
		if err != nil {
			return HandleInfo{}, err
		}
		return infoOf(h), nil
	})
	if err == nil {
		info.PermissionDefaults = a.runtime().permissionDefaults()
	}
	return info, MapError(err)
}

// OpenHandle opens a session for reading or writing with the handle id the
// workflow chose (LIFECYCLE.md §5 step 3). A write open takes the lease first and
// validates the log, and removes the live text files a worker that died
// mid-call left (package livetext: no call streams before the open); a retry with the same handle id returns the same handle;
// a handle id closed before the open landed fails HandleRevoked and releases
// what the open took. It heartbeats while the store reads the log.
func (a *Activities) OpenHandle(ctx context.Context, in OpenHandleInput) (HandleInfo, error) {
	st, err := a.store()
	if err != nil {
		return HandleInfo{}, temporal.NewNonRetryableApplicationError(PersistenceNotConfiguredText, wire.ErrTypePersistenceNotConfigured, nil)
	}
	if in.Access == jsonl.AccessWrite && in.HandleID == "" {
		return HandleInfo{}, MapError(invalid("open: a write handle id is required"))
	}
	info, err := cancellable(a.runtime(), ctx, func(ctx context.Context) (HandleInfo, error) {
		h, err := st.Open(ctx, in.SessionID, in.Access, jsonl.OpenOptions{HandleID: in.HandleID, Owner: in.Owner})
		if err != nil {
			return HandleInfo{}, err
		}
		if in.Access == jsonl.AccessWrite {
			clearLive(ctx, h)
		}
		return infoOf(h), nil
	})
	if err == nil && in.Access == jsonl.AccessWrite {
		info.PermissionDefaults = a.runtime().permissionDefaults()
	}
	return info, ownedError(ctx, st, in.SessionID, err)
}

// Flush makes a created session durable (a header-only log when nothing was
// written yet).
func (a *Activities) Flush(ctx context.Context, in HandleInput) error {
	st, err := a.store()
	if err != nil {
		return err
	}
	return MapError(st.Attach(in.Ref).Flush(ctx))
}

// CloseHandle closes a handle by reference (FORMAT.md §7.7): it works whether or
// not this process opened the handle and whether or not its open or create
// ever reported back. The handle id is revoked, the lease removed if it names
// the handle, and a session that never materialized is erased. It is
// idempotent.
func (a *Activities) CloseHandle(ctx context.Context, in HandleInput) error {
	st, err := a.store()
	if err != nil {
		return err
	}
	defer a.runtime().Heartbeat(ctx, nil).Stop()
	return MapError(st.CloseHandle(ctx, in.Ref))
}

// clearLive removes the live text files of a session opened for writing:
// stale, since no model call of the session runs before its handle is open.
// A failure is only reported: the files are not the log's.
func clearLive(ctx context.Context, h *jsonl.Handle) {
	dir, err := h.Dir(ctx)
	if err == nil {
		_, err = livetext.Clear(dir)
	}
	if err != nil {
		slog.Warn("activities: removing the session's stale live text failed", "session", h.ID(), "error", err)
	}
}
