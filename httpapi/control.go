package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/wire"
)

// maxBodyBytes bounds a request body: an update's input limit and room
// for its JSON around it.
const maxBodyBytes = wire.MaxUpdateInputBytes + 64<<10

// Message modes of POST /v1/sessions/{id}/messages.
const (
	ModeFollowup = "followup"
	ModeSteer    = "steer"
	ModeInject   = "inject"
)

// MessageRequest is the body of POST /v1/sessions/{id}/messages.
type MessageRequest struct {
	// Text is the message, one text block; or give Content.
	Text string `json:"text,omitempty"`
	// Content is the message as content blocks (or a string), instead of
	// Text.
	Content json.RawMessage `json:"content,omitempty"`
	// MessageID is the message's id; empty lets the workflow choose.
	MessageID string `json:"messageId,omitempty"`
	// Mode is ModeFollowup (the default), ModeSteer or ModeInject.
	Mode string `json:"mode,omitempty"`
	// Wait answers once the turn that claims the message has ended (the
	// result's "ended"), bounded by the server's call timeout.
	Wait bool `json:"wait,omitempty"`
}

// CancelRequest is the body of POST /v1/sessions/{id}/cancel.
type CancelRequest struct {
	// Cause is "user" (the default) or "parent", recorded as the aborted
	// turn's reason.
	Cause string `json:"cause,omitempty"`
	// KeepInbox keeps the pending inputs.
	KeepInbox bool `json:"keepInbox,omitempty"`
}

// DecideRequest is the body of POST /v1/sessions/{id}/approvals/{approvalId}.
type DecideRequest struct {
	// Outcome is "allowed-once" or "rejected".
	Outcome string `json:"outcome"`
	// Remember, with "allowed-once", adds an allow rule.
	Remember *wire.ApprovalRule `json:"remember,omitempty"`
}

// ApprovalList is the body of GET /v1/sessions/{id}/approvals.
type ApprovalList struct {
	Approvals []wire.PendingApproval `json:"approvals"`
}

// messages is POST /v1/sessions/{id}/messages.
func (s *Server) messages(w http.ResponseWriter, r *http.Request) {
	var req MessageRequest
	id, ok := s.controlRequest(w, r, &req)
	if !ok {
		return
	}
	in := wire.InputRequest{MessageID: req.MessageID, Content: req.Content, Wait: req.Wait}
	switch {
	case req.Text != "" && len(req.Content) > 0:
		writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, "give text or content, not both", nil)
		return
	case req.Text != "":
		b, _ := marshal(req.Text)
		in.Content = bytes.TrimSuffix(b, []byte("\n"))
	case len(req.Content) == 0:
		writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, "the message is empty: give text or content", nil)
		return
	}
	call := s.opts.Control.Followup
	switch req.Mode {
	case "", ModeFollowup:
	case ModeSteer:
		call = s.opts.Control.Steer
	case ModeInject:
		call = s.opts.Control.Inject
	default:
		writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, fmt.Sprintf("mode must be %q, %q or %q, got %q", ModeFollowup, ModeSteer, ModeInject, req.Mode), nil)
		return
	}
	s.call(w, r, id, func(ctx context.Context) (any, error) { return call(ctx, id, in) })
}

// cancel is POST /v1/sessions/{id}/cancel.
func (s *Server) cancel(w http.ResponseWriter, r *http.Request) {
	var req CancelRequest
	id, ok := s.controlRequest(w, r, &req)
	if !ok {
		return
	}
	cause := req.Cause
	if cause == "" {
		cause = wire.CauseUser
	}
	if cause != wire.CauseUser && cause != wire.CauseParent {
		writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, fmt.Sprintf("cause must be %q or %q, got %q", wire.CauseUser, wire.CauseParent, cause), nil)
		return
	}
	s.call(w, r, id, func(ctx context.Context) (any, error) {
		return s.opts.Control.CancelTurn(ctx, id, cause, req.KeepInbox)
	})
}

// approvals is GET /v1/sessions/{id}/approvals.
func (s *Server) approvals(w http.ResponseWriter, r *http.Request) {
	id, ok := s.controlRequest(w, r, nil)
	if !ok {
		return
	}
	s.call(w, r, id, func(ctx context.Context) (any, error) {
		a, err := s.opts.Control.PendingApprovals(ctx, id)
		if a == nil {
			a = []wire.PendingApproval{}
		}
		return ApprovalList{Approvals: a}, err
	})
}

// decide is POST /v1/sessions/{id}/approvals/{approvalId}.
func (s *Server) decide(w http.ResponseWriter, r *http.Request) {
	var req DecideRequest
	id, ok := s.controlRequest(w, r, &req)
	if !ok {
		return
	}
	aid, err := pathValue(r, "approvalId", "approval id")
	if err != nil {
		writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, err.Error(), nil)
		return
	}
	s.call(w, r, id, func(ctx context.Context) (any, error) {
		return s.opts.Control.Decide(ctx, id, wire.DecideRequest{ID: aid, Outcome: req.Outcome, Remember: req.Remember})
	})
}

// permissions is POST /v1/sessions/{id}/permissions.
func (s *Server) permissions(w http.ResponseWriter, r *http.Request) {
	var req wire.SetPermissionsRequest
	id, ok := s.controlRequest(w, r, &req)
	if !ok {
		return
	}
	s.call(w, r, id, func(ctx context.Context) (any, error) { return s.opts.Control.SetPermissions(ctx, id, req) })
}

// compact is POST /v1/sessions/{id}/compact.
func (s *Server) compact(w http.ResponseWriter, r *http.Request) {
	var req wire.CompactRequest
	id, ok := s.controlRequest(w, r, &req)
	if !ok {
		return
	}
	s.call(w, r, id, func(ctx context.Context) (any, error) { return s.opts.Control.Compact(ctx, id, req) })
}

// dispose is POST /v1/sessions/{id}/dispose.
func (s *Server) dispose(w http.ResponseWriter, r *http.Request) {
	id, ok := s.controlRequest(w, r, &struct{}{})
	if !ok {
		return
	}
	s.call(w, r, id, func(ctx context.Context) (any, error) { return s.opts.Control.Dispose(ctx, id) })
}

// controlRequest checks a control request: a stored session, a server
// with a Temporal connection, and a JSON body (possibly empty) decoded
// strictly into body (nil: no body expected).
func (s *Server) controlRequest(w http.ResponseWriter, r *http.Request, body any) (string, bool) {
	id, _, ok := s.stored(w, r)
	if !ok {
		return "", false
	}
	if s.opts.Control == nil {
		writeError(w, http.StatusServiceUnavailable, TypeUnavailable, "this server has no Temporal connection", nil)
		return "", false
	}
	if body == nil {
		return id, true
	}
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeError(w, http.StatusRequestEntityTooLarge, wire.ErrTypeInvalidArgument, fmt.Sprintf("the request body exceeds %d bytes", maxBodyBytes), nil)
			return "", false
		}
		writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, "read the request body: "+err.Error(), nil)
		return "", false
	}
	if len(data) == 0 {
		return id, true
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, TypeUnsupportedMediaType, "a request body must be sent as Content-Type: application/json", nil)
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(body); err != nil {
		writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, "the request body: "+err.Error(), nil)
		return "", false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, "the request body holds more than one JSON value", nil)
		return "", false
	}
	return id, true
}

// call runs a control call under the call timeout and answers its result
// or its typed error.
func (s *Server) call(w http.ResponseWriter, r *http.Request, id string, fn func(ctx context.Context) (any, error)) {
	ctx, cancel := context.WithTimeout(r.Context(), s.opts.CallTimeout)
	defer cancel()
	res, err := fn(ctx)
	if err == nil {
		writeJSON(w, http.StatusOK, res)
		return
	}
	if r.Context().Err() != nil {
		return // the client went
	}
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Type == "" {
		msg := err.Error()
		if errors.Is(err, context.DeadlineExceeded) {
			msg = fmt.Sprintf("session %q did not answer within %s: is a worker running? (%v)", id, s.opts.CallTimeout.Round(time.Second), err)
		}
		writeError(w, http.StatusServiceUnavailable, TypeUnavailable, msg, nil)
		return
	}
	typ := ce.Type
	var details map[string]any
	switch {
	case typ == client.TypeNotRunning:
		// The session is stored (checked first): its workflow is not
		// running.
		details = map[string]any{"sessionId": id}
	case ce.Outcome != "":
		details = map[string]any{"outcome": ce.Outcome}
	case len(ce.Errors) > 0:
		details = map[string]any{"errors": ce.Errors}
	}
	writeError(w, statusOf(typ), typ, ce.Error(), details)
}
