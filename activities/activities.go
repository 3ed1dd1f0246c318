// Package activities holds sessionflow's Temporal activities over a
// *jsonl.Store: create, open, read, repair, append, seed, flush, close and
// stat of session handles.
//
// Every activity is idempotent under retry (SPEC 0.2): handle ids are chosen
// by the calling workflow, so a retried create or open returns the handle the
// first attempt took, a retried append of a batch that already landed succeeds
// without writing, a retried repair finds its marker last and appends
// nothing, and closing is idempotent. Named store errors become
// non-retryable application errors whose type is the error's code (SPEC
// 0.3); transient I/O errors stay retryable. Activities that read a log
// heartbeat while they read, and never return events through history except
// a bounded batch given to them.
package activities

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"go.temporal.io/sdk/activity"
	sdkclient "go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
)

// Activity names, as registered by RegisterActivity(&Activities{...}). They
// are part of the public contract (docs/API.md).
const (
	CreateHandleName  = "CreateHandle"
	OpenHandleName    = "OpenHandle"
	ReadSummaryName   = "ReadSummary"
	RepairAndMarkName = "RepairAndMark"
	AppendBatchName   = "AppendBatch"
	StoreSeedName     = "StoreSeed"
	FlushName         = "Flush"
	CloseHandleName   = "CloseHandle"
	StatName          = "Stat"
)

// Application error types produced here besides the store's codes
// (jsonl.Code values such as "SessionNotFound").
const (
	// ErrTypeInvalidArgument is the type of a request the activity refuses
	// before touching the store (and of session validation errors).
	ErrTypeInvalidArgument = "InvalidArgument"
	// ErrTypeIO is the type of a retryable transient I/O error.
	ErrTypeIO = "IOError"
	// ErrTypePersistenceNotConfigured is the type of every activity's error
	// when the worker runs without a store.
	ErrTypePersistenceNotConfigured = "PersistenceNotConfigured"
)

// PersistenceNotConfiguredText is the reference text of a resume without a
// persistence backend (SPEC 7.4 step 1).
const PersistenceNotConfiguredText = "cannot resume: session persistence is not configured (load a dsh-session-persistence backend)"

// DefaultHeartbeatInterval is how often a running activity heartbeats.
const DefaultHeartbeatInterval = 2 * time.Second

// DefaultReadChunk is how many events a reading activity takes per store read
// (and per heartbeat opportunity).
const DefaultReadChunk = 1 << 16

// Activities are sessionflow's activities over one store. Register a pointer
// with a worker; the method names are the activity names.
type Activities struct {
	// Store is the session store. A nil Store makes every activity fail with
	// ErrTypePersistenceNotConfigured.
	Store *jsonl.Store
	// HeartbeatInterval is how often long operations heartbeat; zero means
	// DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// ReadChunk is the number of events read per store call; zero means
	// DefaultReadChunk.
	ReadChunk int64
	// Temporal is the client ForfeitDeadOwner asks whether a lease's owning
	// workflow still runs. Without it ForfeitDeadOwner keeps every lease.
	Temporal sdkclient.Client
}

// HandleInfo describes a handle that a create or open activity obtained.
type HandleInfo struct {
	// Ref identifies the handle in any process.
	Ref jsonl.HandleRef `json:"ref"`
	// Header is the session header.
	Header session.Header `json:"header"`
	// InheritedEventCount is the fork cut of the session.
	InheritedEventCount int64 `json:"inheritedEventCount"`
	// NextSeq is the seq the next append must carry (write handles).
	NextSeq int64 `json:"nextSeq"`
	// Materialized reports whether the session has a log file.
	Materialized bool `json:"materialized"`
}

// CreateHandleInput is the input of CreateHandle.
type CreateHandleInput struct {
	// Header is the new session's header.
	Header session.Header `json:"header"`
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

// OpenTurnFacts describes an unfinished turn at the end of a log.
type OpenTurnFacts struct {
	// Turn is the open turn's number.
	Turn int64 `json:"turn"`
	// Step is the open step, 0 when none.
	Step int64 `json:"step"`
	// PendingCalls counts tool calls without a result.
	PendingCalls int `json:"pendingCalls"`
	// RecordedCalls counts the pending calls a tool/call event recorded.
	RecordedCalls int `json:"recordedCalls"`
}

// LogSummary is a bounded description of a stored log: never its events.
type LogSummary struct {
	// Header is the session header.
	Header session.Header `json:"header"`
	// EventCount is the number of events in the log.
	EventCount int64 `json:"eventCount"`
	// NextSeq is the seq of the next event.
	NextSeq int64 `json:"nextSeq"`
	// LastTurn is the number of the last turn/start, 0 if none.
	LastTurn int64 `json:"lastTurn"`
	// LastType is the type of the last event, empty for an empty log.
	LastType string `json:"lastType,omitempty"`
	// EndsWithMarker reports whether the last event is a session/end-seed.
	EndsWithMarker bool `json:"endsWithMarker"`
	// OpenTurn describes the unfinished turn, nil when the log is balanced.
	OpenTurn *OpenTurnFacts `json:"openTurn,omitempty"`
	// InheritedEventCount is the fork cut recorded in storage.
	InheritedEventCount int64 `json:"inheritedEventCount"`
}

// RepairInput is the input of RepairAndMark.
type RepairInput struct {
	// Ref is the resume's write handle.
	Ref jsonl.HandleRef `json:"ref"`
	// Now is the workflow's clock in Unix milliseconds, the time of a marker
	// after an empty log.
	Now int64 `json:"now"`
}

// RepairResult reports what RepairAndMark stored.
type RepairResult struct {
	// Closers is the number of crash closers appended.
	Closers int `json:"closers"`
	// MarkerSeq is the seq of the end-seed marker appended, -1 when none was
	// due (the log already ended with one).
	MarkerSeq int64 `json:"markerSeq"`
	// Appended is the number of events appended (closers + marker).
	Appended int `json:"appended"`
	// Summary describes the log after the repair.
	Summary LogSummary `json:"summary"`
}

// AppendBatchInput is the input of AppendBatch.
type AppendBatchInput struct {
	// Ref is the write handle.
	Ref jsonl.HandleRef `json:"ref"`
	// Events is the bounded batch, contiguous from the log's next seq.
	Events []session.Event `json:"events"`
}

// AppendResult reports the log's next seq after an append.
type AppendResult struct {
	// NextSeq is the seq the next append must carry.
	NextSeq int64 `json:"nextSeq"`
}

// StoreSeedInput is the input of StoreSeed: the fork of a parent's prefix
// into a freshly created, seeded session.
type StoreSeedInput struct {
	// Ref is the new session's write handle.
	Ref jsonl.HandleRef `json:"ref"`
	// ParentSessionID is the session whose prefix is copied.
	ParentSessionID string `json:"parentSessionId"`
	// Count is how many leading events of the parent are copied.
	Count int64 `json:"count"`
	// Now is the workflow's clock in Unix milliseconds, the marker time
	// after an empty prefix.
	Now int64 `json:"now"`
	// Events are appended after the marker in the same batch (events added
	// during setup), contiguous from Count+1.
	Events []session.Event `json:"events,omitempty"`
}

// SeedResult reports what StoreSeed stored.
type SeedResult struct {
	// NextSeq is the seq the next append must carry.
	NextSeq int64 `json:"nextSeq"`
	// LastTurn is the number of the last turn/start stored, 0 if none.
	LastTurn int64 `json:"lastTurn"`
}

// StatInput is the input of Stat.
type StatInput struct {
	// SessionID is the session to describe.
	SessionID string `json:"sessionId"`
}

// StatResult is the output of Stat.
type StatResult struct {
	// Found is false when the session is absent.
	Found bool `json:"found"`
	// Snapshot describes the session when found.
	Snapshot *jsonl.Snapshot `json:"snapshot,omitempty"`
}

func (a *Activities) interval() time.Duration {
	if a.HeartbeatInterval > 0 {
		return a.HeartbeatInterval
	}
	return DefaultHeartbeatInterval
}

func (a *Activities) chunk() int64 {
	if a.ReadChunk > 0 {
		return a.ReadChunk
	}
	return DefaultReadChunk
}

func (a *Activities) store() (*jsonl.Store, error) {
	if a == nil || a.Store == nil {
		return nil, temporal.NewNonRetryableApplicationError("session persistence is not configured", ErrTypePersistenceNotConfigured, nil)
	}
	return a.Store, nil
}

// heartbeat records heartbeats (without details: they would only add
// payloads) every interval until the returned stop is called. Outside an
// activity context it does nothing.
func (a *Activities) heartbeat(ctx context.Context) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(a.interval())
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx)
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// cancellable runs fn while heartbeating and returns as soon as ctx is done,
// leaving fn to finish on its own. Only operations whose late success is
// undone by the workflow's compensation (create and open, closed by handle id)
// and reads use it.
func cancellable[T any](a *Activities, ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	stop := a.heartbeat(ctx)
	defer stop()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, context.Cause(ctx)
	}
}

// MapError converts an error of the store or of the session model into the
// error an activity returns: a *jsonl.Error becomes a non-retryable
// application error typed by its code; a session validation error becomes a
// non-retryable InvalidArgument, and so does a file name the file system
// refuses as too long (ENAMETOOLONG); context errors and application errors
// pass through; anything else is a retryable IOError.
func MapError(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return err
	}
	if code := jsonl.ErrorCode(err); code != "" {
		return temporal.NewNonRetryableApplicationError(err.Error(), string(code), err)
	}
	var seq *session.SeqMismatchError
	if errors.As(err, &seq) {
		return temporal.NewNonRetryableApplicationError(err.Error(), string(jsonl.CodeSeqMismatch), err)
	}
	if isValidation(err) || errors.Is(err, syscall.ENAMETOOLONG) {
		// A name the file system cannot hold fails the same way on every
		// attempt: the request is at fault, not the disk.
		return temporal.NewNonRetryableApplicationError(err.Error(), ErrTypeInvalidArgument, err)
	}
	return temporal.NewApplicationErrorWithCause(err.Error(), ErrTypeIO, err)
}

// validationError marks an error of the session model or of a request.
type validationError struct{ err error }

func (e *validationError) Error() string { return e.err.Error() }
func (e *validationError) Unwrap() error { return e.err }

func invalid(format string, args ...any) error {
	return &validationError{err: fmt.Errorf(format, args...)}
}

func asInvalid(err error) error {
	if err == nil {
		return nil
	}
	return &validationError{err: err}
}

func isValidation(err error) bool {
	var v *validationError
	return errors.As(err, &v) ||
		errors.Is(err, session.ErrNotLossless) ||
		errors.Is(err, session.ErrInvalidEvent) ||
		errors.Is(err, session.ErrEmptyID) ||
		errors.Is(err, session.ErrInvalidUTF8ID)
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
// workflow chose (SPEC 7.3 step 2). Nothing is stored but the lease; a retry
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
	info, err := cancellable(a, ctx, func(ctx context.Context) (HandleInfo, error) {
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
	return info, MapError(err)
}

// OpenHandle opens a session for reading or writing with the handle id the
// workflow chose (SPEC 7.4 step 3). A write open takes the lease first and
// validates the log; a retry with the same handle id returns the same handle;
// a handle id closed before the open landed fails HandleRevoked and releases
// what the open took. It heartbeats while the store reads the log.
func (a *Activities) OpenHandle(ctx context.Context, in OpenHandleInput) (HandleInfo, error) {
	if a == nil || a.Store == nil {
		return HandleInfo{}, temporal.NewNonRetryableApplicationError(PersistenceNotConfiguredText, ErrTypePersistenceNotConfigured, nil)
	}
	st := a.Store
	if in.Access == jsonl.AccessWrite && in.HandleID == "" {
		return HandleInfo{}, MapError(invalid("open: a write handle id is required"))
	}
	info, err := cancellable(a, ctx, func(ctx context.Context) (HandleInfo, error) {
		h, err := st.Open(ctx, in.SessionID, in.Access, jsonl.OpenOptions{HandleID: in.HandleID, Owner: in.Owner})
		if err != nil {
			return HandleInfo{}, err
		}
		return infoOf(h), nil
	})
	return info, ownedError(ctx, st, in.SessionID, err)
}

// scan reads the log of h in chunks, heartbeating, and feeds every event to
// visit. It returns the number of events and the last one.
func (a *Activities) scan(ctx context.Context, h *jsonl.Handle, visit func(session.Event) error) (int64, *session.Event, error) {
	var (
		offset int64
		last   *session.Event
	)
	chunk := a.chunk()
	for {
		if activity.IsActivity(ctx) {
			activity.RecordHeartbeat(ctx)
		}
		evs, err := h.Read(ctx, offset, chunk)
		if err != nil {
			return 0, nil, err
		}
		for i := range evs {
			if err := visit(evs[i]); err != nil {
				return 0, nil, err
			}
		}
		if len(evs) > 0 {
			e := evs[len(evs)-1]
			last = &e
		}
		offset += int64(len(evs))
		if int64(len(evs)) < chunk {
			return offset, last, nil
		}
	}
}

// summarize scans a log into a LogSummary and returns the scanner too.
func (a *Activities) summarize(ctx context.Context, h *jsonl.Handle) (LogSummary, *session.TurnScanner, *session.Event, error) {
	var sc session.TurnScanner
	n, last, err := a.scan(ctx, h, func(e session.Event) error {
		if err := sc.Observe(e); err != nil {
			return asInvalid(fmt.Errorf("session %q: event %d: %w", h.ID(), e.Seq, err))
		}
		return nil
	})
	if err != nil {
		return LogSummary{}, nil, nil, err
	}
	sum := LogSummary{
		Header:              h.Header(),
		EventCount:          n,
		NextSeq:             n,
		LastTurn:            sc.LastTurn(),
		InheritedEventCount: h.InheritedEventCount(),
	}
	if last != nil {
		sum.NextSeq = last.Seq + 1
		sum.LastType = last.Type
		sum.EndsWithMarker = last.Type == session.TypeEndSeed
	}
	if ot, ok := sc.OpenTurn(); ok {
		f := &OpenTurnFacts{Turn: ot.Turn, Step: ot.Step, PendingCalls: len(ot.PendingCalls)}
		for _, c := range ot.PendingCalls {
			if c.Recorded() {
				f.RecordedCalls++
			}
		}
		sum.OpenTurn = f
	}
	return sum, &sc, last, nil
}

// ReadSummary reads the whole validated log through the handle (SPEC 7.4
// step 4) and returns a bounded summary of it: header, counts, next seq, last
// turn, open-turn facts and the stored inherited count. It never returns the
// events. It heartbeats while it reads.
func (a *Activities) ReadSummary(ctx context.Context, in HandleInput) (LogSummary, error) {
	st, err := a.store()
	if err != nil {
		return LogSummary{}, err
	}
	sum, err := cancellable(a, ctx, func(ctx context.Context) (LogSummary, error) {
		s, _, _, err := a.summarize(ctx, st.Attach(in.Ref))
		return s, err
	})
	return sum, MapError(err)
}

// RepairAndMark performs the crash repair of a resume (SPEC 5, 7.4 steps
// 4-7) inside the activity: it reads the log through the write handle,
// computes the interrupted-turn closers and the session/end-seed marker, and
// appends them as one batch, so the events never pass through history. A
// retry after success appends nothing: the marker is then the last event and
// no turn is open.
func (a *Activities) RepairAndMark(ctx context.Context, in RepairInput) (RepairResult, error) {
	st, err := a.store()
	if err != nil {
		return RepairResult{}, err
	}
	stop := a.heartbeat(ctx)
	defer stop()
	res, err := a.repair(ctx, st.Attach(in.Ref), in.Now)
	return res, MapError(err)
}

func (a *Activities) repair(ctx context.Context, h *jsonl.Handle, now int64) (RepairResult, error) {
	sum, sc, last, err := a.summarize(ctx, h)
	if err != nil {
		return RepairResult{}, err
	}
	var batch []session.Event
	if last != nil {
		closers, err := sc.Closers(*last)
		if err != nil {
			return RepairResult{}, asInvalid(err)
		}
		batch = append(batch, closers...)
	}
	// The end-seed rule looks only at the seed's last event; the marker's
	// seq is the seed's length (stored events plus closers).
	var tail []session.Event
	switch {
	case len(batch) > 0:
		tail = batch[len(batch)-1:]
	case last != nil:
		tail = []session.Event{*last}
	}
	res := RepairResult{Closers: len(batch), MarkerSeq: -1}
	if m, due := session.EndSeedMarker(tail, false, session.EndSeedTime(tail, now)); due {
		m.Seq = sum.NextSeq + int64(len(batch))
		res.MarkerSeq = m.Seq
		batch = append(batch, m)
	}
	if len(batch) > 0 {
		if err := h.Append(ctx, batch); err != nil {
			return RepairResult{}, err
		}
	}
	res.Appended = len(batch)
	if len(batch) == 0 {
		res.Summary = sum
		return res, nil
	}
	final := batch[len(batch)-1]
	sum.EventCount += int64(len(batch))
	sum.NextSeq += int64(len(batch))
	sum.LastType = final.Type
	sum.EndsWithMarker = final.Type == session.TypeEndSeed
	sum.OpenTurn = nil
	res.Summary = sum
	return res, nil
}

// AppendBatch appends a bounded batch through a write handle. A retry of a
// batch that already landed succeeds without writing (the store's
// idempotent re-append); any other overlap is SeqMismatch.
func (a *Activities) AppendBatch(ctx context.Context, in AppendBatchInput) (AppendResult, error) {
	st, err := a.store()
	if err != nil {
		return AppendResult{}, err
	}
	stop := a.heartbeat(ctx)
	defer stop()
	h := st.Attach(in.Ref)
	if err := h.Append(ctx, in.Events); err != nil {
		return AppendResult{}, MapError(err)
	}
	next := h.NextSeq()
	if n := len(in.Events); n > 0 {
		next = max(next, in.Events[n-1].Seq+1)
	}
	return AppendResult{NextSeq: next}, nil
}

// StoreSeed forks: it copies the first Count events of the parent session
// into the new seeded session behind Ref, followed by the {inherited:true}
// end-seed marker at seq Count and by Events, as one batch, inside the
// activity (SPEC 5.4, 7.3 step 4c). A retry after success appends nothing.
func (a *Activities) StoreSeed(ctx context.Context, in StoreSeedInput) (SeedResult, error) {
	st, err := a.store()
	if err != nil {
		return SeedResult{}, err
	}
	stop := a.heartbeat(ctx)
	defer stop()
	res, err := a.storeSeed(ctx, st, in)
	return res, MapError(err)
}

func (a *Activities) storeSeed(ctx context.Context, st *jsonl.Store, in StoreSeedInput) (SeedResult, error) {
	if in.Count < 0 || in.Count > session.MaxSafeInteger {
		return SeedResult{}, invalid("fork count must be a non-negative safe integer, got %d", in.Count)
	}
	parent, err := st.Open(ctx, in.ParentSessionID, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		return SeedResult{}, err
	}
	defer parent.Close(context.WithoutCancel(ctx))
	prefix, err := parent.Read(ctx, 0, in.Count)
	if err != nil {
		return SeedResult{}, err
	}
	if int64(len(prefix)) != in.Count {
		return SeedResult{}, invalid("fork of %q needs %d events, the parent has %d", in.ParentSessionID, in.Count, len(prefix))
	}
	marker, _ := session.EndSeedMarker(prefix, true, session.EndSeedTime(prefix, in.Now))
	batch := append(prefix, marker)
	batch = append(batch, in.Events...)
	if err := session.CheckContiguous(in.Ref.SessionID, 0, batch); err != nil {
		return SeedResult{}, err
	}
	if err := st.Attach(in.Ref).Append(ctx, batch); err != nil {
		return SeedResult{}, err
	}
	return SeedResult{NextSeq: int64(len(batch)), LastTurn: session.LastTurn(batch)}, nil
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

// CloseHandle closes a handle by reference (SPEC 0.2): it works whether or
// not this process opened the handle and whether or not its open or create
// ever reported back. The handle id is revoked, the lease removed if it names
// the handle, and a session that never materialized is erased. It is
// idempotent.
func (a *Activities) CloseHandle(ctx context.Context, in HandleInput) error {
	st, err := a.store()
	if err != nil {
		return err
	}
	stop := a.heartbeat(ctx)
	defer stop()
	return MapError(st.CloseHandle(ctx, in.Ref))
}

// Stat describes a session without reading its events or taking ownership.
func (a *Activities) Stat(ctx context.Context, in StatInput) (StatResult, error) {
	st, err := a.store()
	if err != nil {
		return StatResult{}, err
	}
	snap, err := st.Stat(ctx, in.SessionID)
	if err != nil {
		return StatResult{}, MapError(err)
	}
	return StatResult{Found: snap != nil, Snapshot: snap}, nil
}
