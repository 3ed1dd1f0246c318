package workflows

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"unicode/utf8"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/internal/lib/wftrace"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// inputKind is one of the three input updates.
type inputKind struct {
	name   string
	target string
	wake   bool
}

var (
	followupKind = inputKind{name: wire.UpdateFollowup, target: wire.TargetNextTurn, wake: true}
	steerKind    = inputKind{name: wire.UpdateSteer, target: wire.TargetNextStep, wake: true}
	injectKind   = inputKind{name: wire.UpdateInject, target: wire.TargetNextStep, wake: false}
)

// userMessage is the data of a user/message event.
type userMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Source  json.RawMessage `json:"source"`
}

// buildInput validates req and builds the pending input; updateID names
// the message when the request does not. The message must fit a batch of
// maxBatchBytes with the turn's own events.
func buildInput(name string, req wire.InputRequest, updateID string, maxBatchBytes int) (PendingInput, error) {
	id := req.MessageID
	if id == "" {
		id = "msg-" + updateID
	}
	switch {
	case len(id) > wire.MaxMessageIDLength:
		return PendingInput{}, invalidArgument(fmt.Sprintf("%s: messageId must be at most %d bytes", name, wire.MaxMessageIDLength))
	case !utf8.ValidString(id):
		return PendingInput{}, invalidArgument(name + ": messageId must be valid UTF-8")
	}
	content, err := inputContent(name, req.Content)
	if err != nil {
		return PendingInput{}, err
	}
	source := json.RawMessage(`{"kind":"user"}`)
	if len(req.Source) > 0 && string(req.Source) != "null" {
		if source, err = inputSource(name, req.Source); err != nil {
			return PendingInput{}, err
		}
	}
	msg, err := session.MarshalData(userMessage{ID: id, Role: wire.RoleUser, Content: content, Source: source})
	if err != nil {
		return PendingInput{}, invalidArgument(fmt.Sprintf("%s: the message is %s", name, err))
	}
	// The message must fit one stored batch with the turn's own events.
	if n := len(msg) + 256; n > maxBatchBytes {
		return PendingInput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: a message of %d bytes exceeds the batch limit of %d bytes", name, len(msg), maxBatchBytes), wire.ErrTypeBatchTooLarge, nil)
	}
	return PendingInput{ID: id, Message: msg}, nil
}

// inputContent returns content as an array of blocks: a non-empty string
// becomes one text block; an array must be non-empty and hold objects with
// a non-empty string "type", and a text block a non-empty "text".
func inputContent(name string, raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, invalidArgument(name + ": content is required (a string or an array of content blocks)")
	}
	canon, err := session.CanonicalJSON(raw)
	if err != nil {
		return nil, invalidArgument(fmt.Sprintf("%s: content is %s", name, err))
	}
	if canon[0] == '"' {
		var text string
		if err := json.Unmarshal(canon, &text); err != nil {
			return nil, invalidArgument(fmt.Sprintf("%s: content: %s", name, err))
		}
		if text == "" {
			return nil, invalidArgument(name + ": content must not be empty")
		}
		return session.MarshalData([]wire.TextContent{{Type: wire.BlockText, Text: text}})
	}
	var blocks []json.RawMessage
	if canon[0] != '[' || json.Unmarshal(canon, &blocks) != nil {
		return nil, invalidArgument(name + ": content must be a string or an array of content blocks")
	}
	if len(blocks) == 0 {
		return nil, invalidArgument(name + ": content must not be empty")
	}
	for i, b := range blocks {
		var head struct {
			Type *string `json:"type"`
			Text *string `json:"text"`
		}
		if b[0] != '{' || json.Unmarshal(b, &head) != nil || head.Type == nil || *head.Type == "" {
			return nil, invalidArgument(fmt.Sprintf("%s: content[%d] must be an object with a non-empty string \"type\"", name, i))
		}
		if *head.Type == wire.BlockText && (head.Text == nil || *head.Text == "") {
			return nil, invalidArgument(fmt.Sprintf("%s: content[%d] is a text block without text", name, i))
		}
	}
	return canon, nil
}

// inputSource checks a message source: an object with a non-empty string
// "kind".
func inputSource(name string, raw json.RawMessage) (json.RawMessage, error) {
	canon, err := session.CanonicalJSON(raw)
	if err != nil {
		return nil, invalidArgument(fmt.Sprintf("%s: source is %s", name, err))
	}
	var head struct {
		Kind *string `json:"kind"`
	}
	if canon[0] != '{' || json.Unmarshal(canon, &head) != nil || head.Kind == nil || *head.Kind == "" {
		return nil, invalidArgument(name + `: source must be an object with a non-empty string "kind"`)
	}
	return canon, nil
}

// admittedInput is an input update's request as its validator built it:
// the pending input (without the update's trace context) and whether the
// update waits for the turn that claims it.
type admittedInput struct {
	p    PendingInput
	wait bool
}

// validateInput is the validator of Followup, Steer and Inject. The input
// it builds is kept for the handler (decodedRequests).
func (a *agentLoop) validateInput(ctx workflow.Context, k inputKind, in converter.RawValue) error {
	if err := a.phase.admit(); err != nil {
		return err
	}
	var req wire.InputRequest
	if err := decodeRequest(k.name, in, &req); err != nil {
		return err
	}
	p, err := buildInput(k.name, req, workflow.GetCurrentUpdateInfo(ctx).ID, a.set.maxBatchBytes)
	if err != nil {
		return err
	}
	if err := sendableInput(k.name, p.Message); err != nil {
		return err
	}
	if k.wake {
		if err := a.routeMissing(); err != nil {
			return err
		}
	}
	// The same input delivered again is answered, not queued twice: the
	// limits do not apply to it.
	if _, again := a.inbox.delivered(p); !again {
		if a.inbox.has(p.ID) {
			return invalidArgument(fmt.Sprintf("%s: message %s is already pending", k.name, quoteID(p.ID)))
		}
		if turn, used := a.claimedBy(p.ID); used && !a.inbox.isAhead(p.ID) {
			// Another message under a stored id: a WaitTurn for the id
			// could not tell the two turns apart (docs/API.md, message
			// ids). An input an earlier attempt of a workflow task stored
			// ahead of its update is that update's own (queueInput).
			return invalidArgument(fmt.Sprintf("%s: message %s was already used by turn %d; message ids are unique within a session", k.name, quoteID(p.ID), turn))
		}
		if a.inbox.len() >= wire.MaxPendingInputs {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("agent %s holds %d pending inputs; wait for a turn to claim them", quoteID(a.id), wire.MaxPendingInputs), wire.ErrTypeInboxFull, nil)
		}
		if n := a.inbox.bytes(); n+len(p.Message) > wire.MaxPendingInputBytes {
			return temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("agent %s holds %d bytes of pending inputs; a message of %d bytes would exceed %d; wait for a turn to claim them",
					quoteID(a.id), n, len(p.Message), wire.MaxPendingInputBytes), wire.ErrTypeInboxFull, nil)
		}
	}
	a.inputs.keep(ctx, admittedInput{p: p, wait: req.Wait})
	return nil
}

// claimedBy returns the turn that claimed message id, when the loop knows
// it: one of the latest maxRecentClaims stored inputs (carried across
// continue-as-new), the running turn's or a recent turn's (after a
// resume, the log's latest turn).
func (a *agentLoop) claimedBy(id string) (int64, bool) {
	for i := len(a.inbox.claimed) - 1; i >= 0; i-- {
		if a.inbox.claimed[i].ID == id {
			return a.inbox.claimed[i].Turn, true
		}
	}
	if a.turn != nil && slices.Contains(a.turn.summary.Claimed, id) {
		return a.turn.summary.Turn, true
	}
	for i := len(a.recent) - 1; i >= 0; i-- {
		if slices.Contains(a.recent[i].Claimed, id) {
			return a.recent[i].Turn, true
		}
	}
	return 0, false
}

// routeMissing refuses a waking input when the session has no model route:
// its turn could only fail.
func (a *agentLoop) routeMissing() error {
	o := a.agentOptions
	if o == nil || o.Provider == "" || o.Model == "" {
		return invalidArgument(fmt.Sprintf("agent %s has no provider/model: set agentOptions.provider and agentOptions.model", quoteID(a.id)))
	}
	return nil
}

// handleInput queues the input its validator built, or, where the
// validator did not run in this process (a replay), the one it builds the
// same way. An Inject while idle is stored first, as an
// agent/inbox/spliced insertion, with the appends (it returns once it is
// durable).
func (a *agentLoop) handleInput(ctx workflow.Context, k inputKind, in converter.RawValue) (wire.InputResult, error) {
	adm, ok := a.inputs.taken(ctx)
	if !ok {
		var req wire.InputRequest
		if err := decodeRequest(k.name, in, &req); err != nil {
			return wire.InputResult{}, err
		}
		p, err := buildInput(k.name, req, workflow.GetCurrentUpdateInfo(ctx).ID, a.set.maxBatchBytes)
		if err != nil {
			return wire.InputResult{}, err
		}
		adm = admittedInput{p: p, wait: req.Wait}
	}
	res, err := a.queueInput(ctx, k, adm.p)
	if err != nil || !adm.wait {
		return res, err
	}
	info, err := a.waitTurn(ctx, wire.WaitTurnRequest{MessageID: res.MessageID})
	if err != nil {
		return wire.InputResult{}, err
	}
	res.Ended = &info
	return res, nil
}

// queueInput queues the built input p.
func (a *agentLoop) queueInput(ctx workflow.Context, k inputKind, p PendingInput) (wire.InputResult, error) {
	p.Trace = wftrace.HeaderCarrier(ctx)
	res := wire.InputResult{MessageID: p.ID, Target: k.target, SplicedSeq: -1}
	if s, ok := a.inbox.takeAhead(p.ID); ok {
		// An earlier attempt of the workflow task stored it in a turn's
		// batch before this attempt admitted it: it is not queued twice.
		a.inbox.noteClaimed(s.Turn, []PendingInput{p})
		res.Turn = s.Turn
		return res, nil
	}
	if turn, again := a.inbox.delivered(p); again && a.gates.taken(a.dctx, inputAgainChange) {
		// Its update delivered again (sent again by a client whose answer
		// was lost, or to the next run after continue-as-new): the input
		// is pending or stored already.
		res.Turn = turn
		if turn == 0 && a.turn != nil {
			res.Turn = a.turn.summary.Turn
		}
		return res, nil
	}
	if a.turn != nil {
		res.Turn = a.turn.summary.Turn
	}
	if k == injectKind && a.turn == nil {
		if !a.agentTurns() {
			return wire.InputResult{}, invalidArgument("Inject: this run predates the agent loop")
		}
		seq := a.appends.accepted()
		e, err := session.NewEvent(wire.TypeInboxSpliced, seq, workflow.Now(ctx).UnixMilli(), session.InboxSplice{
			Target:   wire.TargetNextStep,
			Start:    int64(a.inbox.storedNextStep()),
			Inserted: []json.RawMessage{p.Message},
		})
		if err != nil {
			return wire.InputResult{}, invalidArgument(err.Error())
		}
		p.Stored = true
		a.inbox.queue(p, wire.TargetNextStep, false)
		res.SplicedSeq = seq
		if _, err := a.appends.append(ctx, AppendRequest{Events: []session.Event{e}}); err != nil {
			// Not stored: the input is not pending either.
			a.inbox.unqueue(p.ID)
			return wire.InputResult{}, err
		}
		return res, nil
	}
	a.inbox.queue(p, k.target, k.wake)
	return res, nil
}
