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

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/internal/lib/wftrace"
	"github.com/sessionflow/sessionflow/session"
)

// The inbox of the agent loop: the user messages queued by Followup, Steer
// and Inject. Inputs travel in the update that queues them and are held in
// workflow state (carried across continue-as-new) until a turn claims them;
// a claimed input is stored as a user/message event in the step that claims
// it. Only an Inject while the loop is idle is stored at once, as an
// agent/inbox/spliced insertion (it may wait indefinitely for a turn); its
// claim is stored as a deletion splice, so the stored splices always
// replay to the inputs still pending.

// inbox is the loop's pending inputs.
type inbox struct {
	nextTurn []PendingInput
	nextStep []PendingInput
	// wake says a waking input (Followup, Steer) is pending.
	wake bool
	// ahead are inputs stored by an earlier attempt of a workflow task
	// before this run admitted their updates (turn_reconcile.go).
	ahead []AheadInput
	// claimed are the latest inputs turns stored (turn_reconcile.go).
	claimed []ClaimedInput
}

func (b *inbox) state() *InboxState {
	if len(b.nextTurn) == 0 && len(b.nextStep) == 0 && !b.wake && len(b.ahead) == 0 && len(b.claimed) == 0 {
		return nil
	}
	return &InboxState{NextTurn: slices.Clone(b.nextTurn), NextStep: slices.Clone(b.nextStep), Wake: b.wake,
		StoredAhead: slices.Clone(b.ahead), Claimed: slices.Clone(b.claimed)}
}

func (b *inbox) restore(s *InboxState) {
	if s == nil {
		return
	}
	b.nextTurn, b.nextStep, b.wake = slices.Clone(s.NextTurn), slices.Clone(s.NextStep), s.Wake
	b.ahead = slices.Clone(s.StoredAhead)
	b.claimed = slices.Clone(s.Claimed)
}

func (b *inbox) len() int { return len(b.nextTurn) + len(b.nextStep) }

// bytes is the encoded size of the pending messages.
func (b *inbox) bytes() int {
	n := 0
	for _, p := range b.nextTurn {
		n += len(p.Message)
	}
	for _, p := range b.nextStep {
		n += len(p.Message)
	}
	return n
}

func (b *inbox) has(id string) bool {
	in := func(l []PendingInput) bool {
		return slices.ContainsFunc(l, func(p PendingInput) bool { return p.ID == id })
	}
	return in(b.nextTurn) || in(b.nextStep)
}

// storedNextStep counts the next-step inputs held by stored splices: the
// length of the stored next-step list.
func (b *inbox) storedNextStep() int { return storedCount(b.nextStep) }

// storedCount counts the inputs of l held by stored splices. They precede
// the others: they come from a resume (which runs before any input
// arrives) or from an idle Inject, and a turn claims every next-step input.
func storedCount(l []PendingInput) int {
	n := 0
	for _, p := range l {
		if p.Stored {
			n++
		}
	}
	return n
}

// restoreStored makes the inputs a resume replayed from the log's splices
// pending; they wait for a waking input, as before the crash.
func (b *inbox) restoreStored(p *activities.PendingInbox) {
	if p == nil {
		return
	}
	n := 0
	conv := func(msgs []json.RawMessage) []PendingInput {
		var out []PendingInput
		for _, m := range msgs {
			n++
			var head struct {
				ID string `json:"id"`
			}
			_ = json.Unmarshal(m, &head)
			if head.ID == "" || b.has(head.ID) || slices.ContainsFunc(out, func(q PendingInput) bool { return q.ID == head.ID }) {
				head.ID = fmt.Sprintf("stored-%d", n)
			}
			out = append(out, PendingInput{ID: head.ID, Message: m, Stored: true})
		}
		return out
	}
	b.nextTurn = conv(p.NextTurn)
	b.nextStep = conv(p.NextStep)
}

// clear discards every pending input and returns their ids.
func (b *inbox) clear() []string {
	out := append(ids(b.nextStep), ids(b.nextTurn)...)
	b.nextTurn, b.nextStep, b.wake = nil, nil, false
	return out
}

// ids lists the ids of l.
func ids(l []PendingInput) []string {
	out := make([]string, 0, len(l))
	for _, p := range l {
		out = append(out, p.ID)
	}
	return out
}

// inputKind is one of the three input updates.
type inputKind struct {
	name   string
	target string
	wake   bool
}

var (
	followupKind = inputKind{name: UpdateFollowup, target: TargetNextTurn, wake: true}
	steerKind    = inputKind{name: UpdateSteer, target: TargetNextStep, wake: true}
	injectKind   = inputKind{name: UpdateInject, target: TargetNextStep, wake: false}
)

// userMessage is the data of a user/message event.
type userMessage struct {
	ID      string          `json:"id"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Source  json.RawMessage `json:"source"`
}

// buildInput validates req and builds the pending input; updateID names
// the message when the request does not.
func (l *lifecycle) buildInput(name string, req InputRequest, updateID string) (PendingInput, error) {
	id := req.MessageID
	if id == "" {
		id = "msg-" + updateID
	}
	switch {
	case len(id) > MaxMessageIDLength:
		return PendingInput{}, invalidArgument(fmt.Sprintf("%s: messageId must be at most %d bytes", name, MaxMessageIDLength))
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
	msg, err := session.MarshalData(userMessage{ID: id, Role: session.RoleUser, Content: content, Source: source})
	if err != nil {
		return PendingInput{}, invalidArgument(fmt.Sprintf("%s: the message is %s", name, err))
	}
	// The message must fit one stored batch with the turn's own events.
	if n := len(msg) + 256; n > l.set.maxBatchBytes {
		return PendingInput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s: a message of %d bytes exceeds the batch limit of %d bytes", name, len(msg), l.set.maxBatchBytes), ErrTypeBatchTooLarge, nil)
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
		return session.MarshalData([]session.TextContent{{Type: session.BlockText, Text: text}})
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
		if *head.Type == session.BlockText && (head.Text == nil || *head.Text == "") {
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

// validateInput is the validator of Followup, Steer and Inject.
func (l *lifecycle) validateInput(ctx workflow.Context, k inputKind, in converter.RawValue) error {
	if l.phase != PhaseLive || l.disposeWanted {
		return l.notLive()
	}
	var req InputRequest
	if err := decodeRequest(k.name, in, &req); err != nil {
		return err
	}
	upd := workflow.GetCurrentUpdateInfo(ctx).ID
	p, err := l.buildInput(k.name, req, upd)
	if err != nil {
		return err
	}
	if err := sendableInput(k.name, p.Message); err != nil {
		return err
	}
	if k.wake {
		if err := l.routeMissing(); err != nil {
			return err
		}
	}
	if _, again := l.agent.inbox.delivered(p); again {
		// The same input delivered again: answered, not queued twice.
		return nil
	}
	if l.agent.inbox.has(p.ID) {
		return invalidArgument(fmt.Sprintf("%s: message %s is already pending", k.name, quoteID(p.ID)))
	}
	if l.agent.inbox.len() >= MaxPendingInputs {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("agent %s holds %d pending inputs; wait for a turn to claim them", quoteID(l.id), MaxPendingInputs), ErrTypeInboxFull, nil)
	}
	if n := l.agent.inbox.bytes(); n+len(p.Message) > MaxPendingInputBytes {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("agent %s holds %d bytes of pending inputs; a message of %d bytes would exceed %d; wait for a turn to claim them",
				quoteID(l.id), n, len(p.Message), MaxPendingInputBytes), ErrTypeInboxFull, nil)
	}
	return nil
}

// routeMissing refuses a waking input when the session has no model route:
// its turn could only fail.
func (l *lifecycle) routeMissing() error {
	o := l.agent.options
	if o == nil || o.Provider == "" || o.Model == "" {
		return invalidArgument(fmt.Sprintf("agent %s has no provider/model: set agentOptions.provider and agentOptions.model", quoteID(l.id)))
	}
	return nil
}

// handleInput queues the input. An Inject while idle is stored first, as
// an agent/inbox/spliced insertion, with the appends (it returns once it is
// durable).
func (l *lifecycle) handleInput(ctx workflow.Context, k inputKind, in converter.RawValue) (InputResult, error) {
	var req InputRequest
	if err := decodeRequest(k.name, in, &req); err != nil {
		return InputResult{}, err
	}
	res, err := l.queueInput(ctx, k, req)
	if err != nil || !req.Wait {
		return res, err
	}
	info, err := l.waitTurn(ctx, WaitTurnRequest{MessageID: res.MessageID})
	if err != nil {
		return InputResult{}, err
	}
	res.Ended = &info
	return res, nil
}

// queueInput queues the decoded input req.
func (l *lifecycle) queueInput(ctx workflow.Context, k inputKind, req InputRequest) (InputResult, error) {
	p, err := l.buildInput(k.name, req, workflow.GetCurrentUpdateInfo(ctx).ID)
	if err != nil {
		return InputResult{}, err
	}
	p.Trace = wftrace.HeaderCarrier(ctx)
	a := &l.agent
	res := InputResult{MessageID: p.ID, Target: k.target, SplicedSeq: -1}
	if s, ok := a.inbox.takeAhead(p.ID); ok {
		// An earlier attempt of the workflow task stored it in a turn's
		// batch before this attempt admitted it: it is not queued twice.
		a.inbox.noteClaimed(s.Turn, []PendingInput{p})
		res.Turn = s.Turn
		return res, nil
	}
	if turn, again := a.inbox.delivered(p); again && a.againChange.takenIn(l.dctx, inputAgainChange) {
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
		if !l.agentTurns() {
			return InputResult{}, invalidArgument("Inject: this run predates the agent loop")
		}
		seq := l.nextSeq + l.pendingEvents
		e, err := session.NewEvent(session.TypeInboxSpliced, seq, workflow.Now(ctx).UnixMilli(), session.InboxSplice{
			Target:   TargetNextStep,
			Start:    int64(a.inbox.storedNextStep()),
			Inserted: []json.RawMessage{p.Message},
		})
		if err != nil {
			return InputResult{}, invalidArgument(err.Error())
		}
		p.Stored = true
		a.inbox.nextStep = append(a.inbox.nextStep, p)
		res.SplicedSeq = seq
		if _, err := l.handleAppend(ctx, AppendRequest{Events: []session.Event{e}}); err != nil {
			// Not stored: the input is not pending either.
			a.inbox.nextStep = slices.DeleteFunc(a.inbox.nextStep, func(q PendingInput) bool { return q.ID == p.ID })
			return InputResult{}, err
		}
		return res, nil
	}
	if k.target == TargetNextTurn {
		a.inbox.nextTurn = append(a.inbox.nextTurn, p)
	} else {
		a.inbox.nextStep = append(a.inbox.nextStep, p)
	}
	if k.wake {
		a.inbox.wake = true
	}
	return res, nil
}
