package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/tool"
	"github.com/sessionflow/sessionflow/wire"
)

// A tool call that must be approved (docs/API.md "Approvals", FORMAT.md
// §10): RunTool stores its tool/call and approval/asked in one batch and
// reports the question; the workflow waits for the user's Decide and runs
// RunTool again with the decision, which stores approval/decided (and the
// session's allow rules when the user added one) and then runs the tool,
// or stores the refusal as the call's result. The log is the truth: a
// retry finds what an earlier attempt stored and goes on from there.

// ToolApproval is what RunTool needs to gate a call: the session's
// approval policy and allow rules, and the user's decision once there is
// one.
type ToolApproval struct {
	// Policy is wire.ApprovalAsk or wire.ApprovalNever.
	Policy string `json:"policy"`
	// Rules are the session's allow rules.
	Rules []wire.ApprovalRule `json:"rules,omitempty"`
	// Decision is the answer to the call's approval/asked.
	Decision *ToolDecision `json:"decision,omitempty"`
}

// ToolDecision is the answer to a call's question.
type ToolDecision struct {
	// ID is the approval's id.
	ID string `json:"id"`
	// Outcome is one of the wire.Outcome* values.
	Outcome string `json:"outcome"`
	// TimeoutMs, when positive, reports a rejection for want of a
	// decision within it.
	TimeoutMs int64 `json:"timeoutMs,omitempty"`
	// Rules, when not nil, are the session's allow rules after the
	// decision added one: stored after approval/decided.
	Rules *[]wire.ApprovalRule `json:"rules,omitempty"`
}

// AskedApproval is a question RunTool stored and the workflow now waits
// on.
type AskedApproval struct {
	// ID is the approval's id.
	ID string `json:"id"`
	// Reason is the question's reason.
	Reason string `json:"reason"`
	// Escalation is the mode an escalating call asks for, "" for none.
	Escalation string `json:"escalation,omitempty"`
	// Arguments are the call's arguments, cut to
	// wire.MaxApprovalArguments bytes (Truncated then).
	Arguments string `json:"arguments"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Codes and name of the result of a call that was not approved.
const (
	// NameApprovalDenied is their ErrorInfo name.
	NameApprovalDenied = "ApprovalDeniedError"
	// CodeApprovalRejected: the user rejected it, or the session's
	// policy (never) rejected its escalation.
	CodeApprovalRejected = "APPROVAL_REJECTED"
	// CodeApprovalCancelled: its turn was cancelled while it waited.
	CodeApprovalCancelled = "APPROVAL_CANCELLED"
	// CodeApprovalTimeout: no decision came within the session's
	// approval timeout.
	CodeApprovalTimeout = "APPROVAL_TIMEOUT"
	// CodeApprovalUnavailable: nothing could answer.
	CodeApprovalUnavailable = "APPROVAL_UNAVAILABLE"
)

// askedData is approval/asked's data.
type askedData struct {
	ID       string `json:"id"`
	ToolName string `json:"toolName"`
	CallID   string `json:"callId,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// askedEvent is a stored approval/asked.
type askedEvent struct {
	askedData
	seq int64
}

// decidedData is approval/decided's data.
type decidedData struct {
	ID      string `json:"id"`
	Outcome string `json:"outcome"`
}

// approvalID is the id of the question about call callID of step step of
// turn turn: the same on every attempt, unique in the session, in the
// harness's UUID shape.
func approvalID(sessionID string, turn, step int64, callID string) string {
	sum := sha256.Sum256([]byte("approval\x00" + sessionID + "\x00" + strconv.FormatInt(turn, 10) + "\x00" + strconv.FormatInt(step, 10) + "\x00" + callID))
	b := sum[:16]
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// askedEventAt builds approval/asked at seq.
func askedEventAt(d askedData, seq, t int64) (session.Event, error) {
	return session.NewEvent(wire.TypeApprovalAsked, seq, t, d)
}

// decidedEventAt builds approval/decided at seq.
func decidedEventAt(id, outcome string, seq, t int64) (session.Event, error) {
	return session.NewEvent(wire.TypeApprovalDecided, seq, t, decidedData{ID: id, Outcome: outcome})
}

// rulesEventAt builds the ignorable approval/rules at seq.
func rulesEventAt(rules []wire.ApprovalRule, seq, t int64) (session.Event, error) {
	if rules == nil {
		rules = []wire.ApprovalRule{}
	}
	e, err := session.NewEvent(wire.TypeApprovalRules, seq, t, struct {
		Rules []wire.ApprovalRule `json:"rules"`
	}{rules})
	e.Ignorable = true
	return e, err
}

// deniedResult is the result of a call whose approval ended in outcome,
// in the harness's words (its tool registry's and its escalation's);
// escalation is the mode an escalating call asked for; a positive
// timeoutMs reports a rejection for want of a decision.
func deniedResult(name, escalation, outcome string, timeoutMs int64) tool.Result {
	subject := "operation"
	if name == tool.RunCommandName {
		subject = "command"
	}
	var code, text string
	switch {
	case outcome == wire.OutcomeRejected && timeoutMs > 0:
		code = CodeApprovalTimeout
		text = fmt.Sprintf("no decision on the approval for tool %q within %s: rejected", name, time.Duration(timeoutMs)*time.Millisecond)
	case outcome == wire.OutcomeRejected && escalation != "":
		code, text = CodeApprovalRejected, fmt.Sprintf("the user rejected escalating this %s to %q", subject, escalation)
	case outcome == wire.OutcomeRejected:
		code, text = CodeApprovalRejected, fmt.Sprintf("the user rejected tool %q", name)
	case outcome == wire.OutcomeCancelled && escalation != "":
		code, text = CodeApprovalCancelled, fmt.Sprintf("approval for escalating to %q was cancelled", escalation)
	case outcome == wire.OutcomeCancelled:
		code, text = CodeApprovalCancelled, fmt.Sprintf("approval for tool %q was cancelled", name)
	case escalation != "":
		code, text = CodeApprovalUnavailable, fmt.Sprintf("sandbox escalation to %q requires approval, but no approval channel is available", escalation)
	default:
		code, text = CodeApprovalUnavailable, fmt.Sprintf("tool %q requires approval, but no approval channel is available", name)
	}
	return tool.ErrorResult(NameApprovalDenied, code, "Error: "+text)
}

// cutArguments cuts args to wire.MaxApprovalArguments bytes at a rune
// boundary.
func cutArguments(args string) (string, bool) {
	if len(args) <= wire.MaxApprovalArguments {
		return args, false
	}
	n := wire.MaxApprovalArguments
	for n > 0 && args[n]&0xC0 == 0x80 {
		n--
	}
	return args[:n], true
}

// escalationReason starts the reason of an escalation's question.
const escalationReason = "escalate sandbox to "

// askedEscalation is the mode the call c asked for when its question ask
// is an escalation's, "" otherwise.
func askedEscalation(ask askedEvent, c wire.ContentBlock) string {
	if !strings.HasPrefix(ask.Reason, escalationReason) {
		return ""
	}
	args, err := argumentsText(c.Arguments)
	if err != nil {
		return ""
	}
	var a struct {
		Mode string `json:"sandbox_permissions"`
	}
	if json.Unmarshal([]byte(args), &a) != nil {
		return ""
	}
	return a.Mode
}
