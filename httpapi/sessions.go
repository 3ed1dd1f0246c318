package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// Session states.
const (
	// StateLive: a workflow of the session runs.
	StateLive = "live"
	// StateStored: no workflow of the session runs; the log is stored.
	StateStored = "stored"
	// StateUnknown: Temporal could not be asked (StateError says why).
	StateUnknown = "unknown"
)

// Session is one session as GET /v1/sessions and GET /v1/sessions/{id}
// show it.
type Session struct {
	// ID is the session id.
	ID string `json:"id"`
	// State is StateLive, StateStored or StateUnknown.
	State string `json:"state"`
	// Phase is the running workflow's lifecycle phase, when live.
	Phase wire.Phase `json:"phase,omitempty"`
	// StateError is why the state is unknown.
	StateError string `json:"stateError,omitempty"`
	// Cwd is the session's working directory, "" for none.
	Cwd string `json:"cwd"`
	// Provider and Model are those of the last model call (the last
	// request/context event), absent before the first.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// ParentSession is the parent, if any: the session forked, or the one
	// whose subagent call started this one (Origin "subagent").
	ParentSession string `json:"parentSession,omitempty"`
	// Origin is "subagent" for a subagent call's child session.
	Origin string `json:"origin,omitempty"`
	// DelegationDepth is a child's depth of delegation (0 for a root).
	DelegationDepth int64 `json:"delegationDepth,omitempty"`
	// CreatedAt is the header's creation time (Unix ms).
	CreatedAt int64 `json:"createdAt"`
	// Turns counts the turns started in the log.
	Turns int64 `json:"turns"`
	// LastSeq is the seq of the last stored event, -1 for none.
	LastSeq int64 `json:"lastSeq"`
	// UpdatedAt is the time of the last stored event (Unix ms), the
	// creation time when there is none.
	UpdatedAt int64 `json:"updatedAt"`
	// Pending reports a session created and never written.
	Pending bool `json:"pending,omitempty"`
	// WorkflowID is the session's workflow id; RunID the running run's.
	WorkflowID string `json:"workflowId"`
	RunID      string `json:"runId,omitempty"`
	// Loop is the live session's LoopState (GET /v1/sessions/{id} only).
	Loop *wire.LoopState `json:"loop,omitempty"`
	// Error is set on a listed entry the store cannot serve.
	Error *ErrorInfo `json:"error,omitempty"`
}

// SessionList is the body of GET /v1/sessions.
type SessionList struct {
	Sessions []Session `json:"sessions"`
	// NextCursor, when set, lists the next page (?cursor=).
	NextCursor string `json:"nextCursor,omitempty"`
}

// Listing bounds.
const (
	defaultListLimit = 100
	maxListLimit     = 1000
	summaryCacheSize = 4096
)

// logSummary is what the log says of a session at one revision.
type logSummary struct {
	revision        string
	turns, lastSeq  int64
	updatedAt       int64
	createdAt       int64
	cwd, parent     string
	origin          string
	depth           int64
	provider, model string
	pending         bool
}

// summaryCache keeps the summaries of the logs read, by session id, valid
// while the log's revision is the same.
type summaryCache struct {
	mu  sync.Mutex
	max int
	m   map[string]logSummary
}

func newSummaryCache(max int) *summaryCache {
	return &summaryCache{max: max, m: map[string]logSummary{}}
}

func (c *summaryCache) get(id, revision string) (logSummary, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.m[id]
	return s, ok && s.revision == revision
}

func (c *summaryCache) put(id string, s logSummary) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[id]; !ok && len(c.m) >= c.max {
		for k := range c.m { // evict one, any
			delete(c.m, k)
			break
		}
	}
	c.m[id] = s
}

// summarize reads the summary of the session whose snapshot is snap: from
// the cache while the revision holds, else through a read handle.
func (s *Server) summarize(ctx context.Context, snap *jsonl.Snapshot) (logSummary, error) {
	id := snap.Header.ID
	if sum, ok := s.sums.get(id, snap.Revision); ok {
		return sum, nil
	}
	sum := logSummary{revision: snap.Revision, lastSeq: -1, createdAt: snap.Header.CreatedAt, updatedAt: snap.Header.CreatedAt,
		cwd: snap.Header.Cwd, parent: snap.Header.ParentSession, origin: snap.Header.Origin, depth: snap.Header.DelegationDepth, pending: snap.Pending}
	if !snap.Pending {
		h, err := s.opts.Store.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
		if err != nil {
			return sum, err
		}
		evs, err := h.Read(ctx, 0, -1)
		_ = h.Close(ctx)
		if err != nil {
			return sum, err
		}
		sum.tally(evs)
	}
	s.sums.put(id, sum)
	return sum, nil
}

// tally counts the turns and finds the last event.
func (sum *logSummary) tally(evs []session.Event) {
	for _, e := range evs {
		switch e.Type {
		case wire.TypeTurnStart:
			sum.turns++
		case wire.TypeRequestContext:
			var rc struct{ Provider, Model string }
			if json.Unmarshal(e.Data, &rc) == nil {
				sum.provider, sum.model = rc.Provider, rc.Model
			}
		}
	}
	if n := len(evs); n > 0 {
		sum.lastSeq = evs[n-1].Seq
		sum.updatedAt = evs[n-1].Time
	}
}

// sessionOf builds the stored view of a session.
func sessionOf(id string, sum logSummary) Session {
	return Session{ID: id, State: StateStored, Cwd: sum.cwd, Provider: sum.provider, Model: sum.model, ParentSession: sum.parent, Origin: sum.origin, DelegationDepth: sum.depth, CreatedAt: sum.createdAt,
		Turns: sum.turns, LastSeq: sum.lastSeq, UpdatedAt: sum.updatedAt, Pending: sum.pending, WorkflowID: wire.WorkflowID(id)}
}

// listSessions is GET /v1/sessions[?limit=N&cursor=C].
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	limit := defaultListLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, fmt.Sprintf("limit must be an integer from 1 to %d, got %q", maxListLimit, v), nil)
			return
		}
		limit = n
	}
	ctx := r.Context()
	running, stateErr := s.running(ctx)
	out := SessionList{Sessions: []Session{}}
	last := ""
	for row, err := range s.opts.Store.Rows(ctx, r.URL.Query().Get("cursor")) {
		if err != nil {
			if jsonl.ErrorCode(err) == wire.CodeInvalidArgument {
				writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, err.Error(), nil)
				return
			}
			writeError(w, http.StatusInternalServerError, TypeInternal, "list the store: "+err.Error(), nil)
			return
		}
		if len(out.Sessions) == limit {
			out.NextCursor = last
			break
		}
		last = row.Cursor
		if row.Problem != nil {
			out.Sessions = append(out.Sessions, Session{ID: row.Header.ID, State: StateStored, LastSeq: -1,
				Error: &ErrorInfo{Type: string(row.Problem.Code), Message: row.Problem.Reason}})
			continue
		}
		snap := row.Snapshot
		sum, err := s.summarize(ctx, &snap)
		sess := sessionOf(row.Header.ID, sum)
		if err != nil {
			sess.Error = &ErrorInfo{Type: errorType(err), Message: err.Error()}
		}
		switch {
		case stateErr != nil:
			sess.State, sess.StateError = StateUnknown, stateErr.Error()
		default:
			if l, ok := running[sess.ID]; ok {
				sess.State, sess.Phase, sess.WorkflowID, sess.RunID = StateLive, l.Phase, l.WorkflowID, l.RunID
			}
		}
		out.Sessions = append(out.Sessions, sess)
	}
	writeJSON(w, http.StatusOK, out)
}

// running lists the running sessions through Temporal visibility, by id.
func (s *Server) running(ctx context.Context) (map[string]client.ListedSession, error) {
	if s.opts.Control == nil {
		return nil, errors.New("this server has no Temporal connection")
	}
	qctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	ls, err := s.opts.Control.List(qctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]client.ListedSession, len(ls))
	for _, l := range ls {
		m[l.SessionID] = l
	}
	return m, nil
}

// getSession is GET /v1/sessions/{id}.
func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	id, snap, ok := s.stored(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	sum, err := s.summarize(ctx, snap)
	if err != nil {
		s.storeError(w, err)
		return
	}
	sess := sessionOf(id, sum)
	if s.opts.Control == nil {
		sess.State, sess.StateError = StateUnknown, "this server has no Temporal connection"
		writeJSON(w, http.StatusOK, sess)
		return
	}
	qctx, cancel := context.WithTimeout(ctx, s.opts.QueryTimeout)
	defer cancel()
	d, err := s.opts.Control.Describe(qctx, id)
	switch {
	case errors.Is(err, client.ErrNotRunning):
	case err != nil:
		sess.State, sess.StateError = StateUnknown, err.Error()
	case d.Phase != wire.PhaseClosed:
		sess.State, sess.Phase = StateLive, d.Phase
		if st, err := s.opts.Control.LoopState(qctx, id); err == nil {
			sess.Loop = &st
		}
	}
	writeJSON(w, http.StatusOK, sess)
}

// stored resolves the {id} of the path to a stored session, or answers
// 400 (a bad id) or 404 (no such session).
func (s *Server) stored(w http.ResponseWriter, r *http.Request) (string, *jsonl.Snapshot, bool) {
	id, err := sessionID(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, err.Error(), nil)
		return "", nil, false
	}
	snap, err := s.opts.Store.Stat(r.Context(), id)
	if err != nil {
		s.storeError(w, err)
		return "", nil, false
	}
	if snap == nil {
		writeError(w, http.StatusNotFound, TypeNoSuchSession, fmt.Sprintf("no session %q in the store", id), nil)
		return "", nil, false
	}
	return id, snap, true
}

// storeError answers a store failure: its code as the type.
func (s *Server) storeError(w http.ResponseWriter, err error) {
	typ := errorType(err)
	status := http.StatusInternalServerError
	switch wire.Code(typ) {
	case wire.CodeNotFound:
		typ, status = TypeNoSuchSession, http.StatusNotFound
	case wire.CodeInvalidArgument:
		status = http.StatusBadRequest
	}
	writeError(w, status, typ, err.Error(), nil)
}

// errorType is the type of a store or client error, TypeInternal for
// another.
func errorType(err error) string {
	var se *wire.StoreError
	if errors.As(err, &se) && se.Code != "" {
		return string(se.Code)
	}
	var ce *client.Error
	if errors.As(err, &ce) && ce.Type != "" {
		return ce.Type
	}
	return TypeInternal
}
