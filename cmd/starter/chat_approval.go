package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/wire"
)

// approvalPrompt is the question the chat asks about a call waiting for
// approval.
const approvalPrompt = "Allow? [y]es / [n]o / [a]lways: "

// Bounds of a call's arguments shown with its question.
const (
	maxApprovalLines     = 6
	maxApprovalLineRunes = 160
)

// asker asks the user about the calls of the followed turn that wait for
// approval, one at a time in the order asked.
type asker struct {
	ch    *chat
	view  *turnView
	queue []wire.PendingApproval
}

// asking reports whether a question is open.
func (q *asker) asking() bool { return len(q.queue) > 0 }

// add queues the question of approval a, asking it at once when no other
// is open.
func (q *asker) add(a wire.PendingApproval) {
	if slices.ContainsFunc(q.queue, func(p wire.PendingApproval) bool { return p.ID == a.ID }) {
		return
	}
	q.queue = append(q.queue, a)
	if len(q.queue) == 1 {
		q.ask()
	}
}

// settled forgets the question about call callID, which started or
// finished: it was decided elsewhere (another starter, its timeout).
func (q *asker) settled(callID string) {
	i := slices.IndexFunc(q.queue, func(p wire.PendingApproval) bool { return p.CallID == callID })
	if i < 0 {
		return
	}
	q.queue = slices.Delete(q.queue, i, i+1)
	if i == 0 {
		q.view.newline()
		fmt.Fprintf(q.ch.w, "call %s was decided elsewhere\n", displayText(callID))
		if q.asking() {
			q.ask()
		}
	}
}

// ask prints the open question: the call's tool, the reason, its
// arguments cut to a few lines, the rule [a]lways would add, and the
// prompt.
func (q *asker) ask() {
	a := q.queue[0]
	w := q.ch.w
	q.view.newline()
	head := "⏸ " + displayText(a.Tool) + " (" + displayText(a.CallID) + ") waits for your approval"
	if a.Reason != "" {
		head += ": " + termText(a.Reason, false)
	}
	fmt.Fprintln(w, head)
	for _, line := range approvalArgLines(a) {
		fmt.Fprintln(w, "  "+line)
	}
	if rule, err := deriveRule(a); err == nil {
		fmt.Fprintf(w, "  [a]lways also allows from now on: %s\n", ruleText(rule))
	} else {
		fmt.Fprintf(w, "  [a]lways cannot apply: %s\n", errorText(err))
	}
	q.prompt()
}

// prompt asks the open question. Until it is answered the line is open:
// what else is printed meanwhile starts on a line of its own.
func (q *asker) prompt() {
	fmt.Fprint(q.ch.w, approvalPrompt)
	q.view.midLine = true
}

// answer acts on a line typed while a question is open: y allows the call
// once, n rejects it, a allows it and adds the rule derived from it; a
// command (/steer, /quit, ...) is run and the question asked again.
func (q *asker) answer(ctx context.Context, line string) error {
	a := q.queue[0]
	line = strings.TrimSpace(line)
	// A terminal echoed the answer and its newline; piped input is shown.
	if !q.ch.in.terminal {
		fmt.Fprint(q.ch.w, termText(line, false))
		q.view.newline()
	}
	q.view.midLine = false
	req := wire.DecideRequest{ID: a.ID, CallID: a.CallID}
	switch strings.ToLower(line) {
	case "y", "yes":
		req.Outcome = wire.OutcomeAllowedOnce
	case "n", "no":
		req.Outcome = wire.OutcomeRejected
	case "a", "always":
		rule, err := deriveRule(a)
		if err != nil {
			fmt.Fprintf(q.ch.w, "cannot allow calls like it: %s; answer y or n\n", errorText(err))
			q.prompt()
			return nil
		}
		req.Outcome, req.Remember = wire.OutcomeAllowedOnce, &rule
	default:
		if strings.HasPrefix(line, "/") {
			if err := q.ch.handle(ctx, line, true); err != nil {
				var leave *leaveRequest
				if errors.As(err, &leave) {
					return err
				}
				fmt.Fprintf(q.ch.w, "error: %s\n", errorText(err))
			}
		} else if line != "" {
			fmt.Fprintln(q.ch.w, "answer y (run it once), n (reject it) or a (run it, and calls like it from now on)")
		}
		if q.asking() {
			q.prompt()
		}
		return nil
	}
	res, err := q.ch.c.Decide(ctx, q.ch.id, req)
	var ce *client.Error
	switch {
	case err == nil:
		fmt.Fprintln(q.ch.w, decisionText(res, &a, req.Remember))
	case errors.As(err, &ce) && errors.Is(err, client.ErrApprovalSettled):
		fmt.Fprintf(q.ch.w, "call %s was decided already: %s\n", displayText(a.CallID), termText(orDash(ce.Outcome), false))
	case errors.Is(err, client.ErrNoSuchApproval):
		fmt.Fprintf(q.ch.w, "call %s waits for no approval any more\n", displayText(a.CallID))
	default:
		// The question stays open: answer again.
		fmt.Fprintf(q.ch.w, "error: %s\n", errorText(err))
		q.prompt()
		return nil
	}
	q.queue = q.queue[1:]
	if q.asking() {
		q.ask()
	}
	return nil
}

// approvalArgLines renders a call's arguments in a few lines: each field
// of a JSON object as "name: value" (a string's lines as they are), or
// the arguments on one line; at most maxApprovalLines lines, each cut.
func approvalArgLines(a wire.PendingApproval) []string {
	var lines []string
	fields, ok := objectFields(a.Arguments)
	if !ok {
		line := argsLine(a.Arguments)
		if a.Truncated {
			line += " (cut)"
		}
		lines = []string{line}
	}
	for _, f := range fields {
		var s string
		if json.Unmarshal(f.value, &s) != nil {
			lines = append(lines, f.name+": "+argsLine(string(f.value)))
			continue
		}
		parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
		lines = append(lines, f.name+": "+parts[0])
		for _, p := range parts[1:] {
			lines = append(lines, "  "+p)
		}
	}
	more := 0
	if len(lines) > maxApprovalLines {
		more = len(lines) - (maxApprovalLines - 1)
		lines = lines[:maxApprovalLines-1]
	}
	for i, l := range lines {
		lines[i] = termText(clip(strings.ReplaceAll(l, "\t", "    "), maxApprovalLineRunes), false)
	}
	if more > 0 {
		lines = append(lines, fmt.Sprintf("… (%d more lines)", more))
	}
	return lines
}

// field is one member of a JSON object, in order.
type field struct {
	name  string
	value json.RawMessage
}

// objectFields returns the members of the JSON object s in order; ok is
// false when s is not one.
func objectFields(s string) ([]field, bool) {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, false
	}
	var fields []field
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, false
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, false
		}
		fields = append(fields, field{name, v})
	}
	if t, err := dec.Token(); err != nil || t != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return fields, true
}

// permissions runs /permissions: with no argument it shows the session's
// permissions; "ask" or "never" switches its approval policy, a preset's
// name its preset (as the harness's /permission), between turns.
func (ch *chat) permissions(ctx context.Context, arg string, running bool) error {
	switch arg {
	case "":
		st, err := ch.c.LoopState(ctx, ch.id)
		if err != nil {
			return err
		}
		if st.Permissions == nil {
			fmt.Fprintln(ch.w, "the session reports no permissions: its worker predates approvals")
			return nil
		}
		return renderPermissions(ch.w, *st.Permissions)
	case wire.ApprovalAsk, wire.ApprovalNever:
		if running {
			fmt.Fprintln(ch.w, "/permissions "+arg+" runs between turns: type it again when the turn has ended")
			return nil
		}
		p, err := ch.c.SetPermissions(ctx, ch.id, wire.SetPermissionsRequest{ApprovalPolicy: arg})
		if err != nil {
			return err
		}
		fmt.Fprintf(ch.w, "approval policy %s\n", displayText(p.ApprovalPolicy))
		return renderPermissions(ch.w, p)
	case wire.PresetReadOnly, wire.PresetWorkspaceWrite, wire.PresetDangerFullAccess:
		// The harness's /permission <preset>.
		if running {
			fmt.Fprintln(ch.w, "/permissions "+arg+" runs between turns: type it again when the turn has ended")
			return nil
		}
		p, err := ch.c.SetPermissions(ctx, ch.id, wire.SetPermissionsRequest{Preset: arg})
		if err != nil {
			return err
		}
		fmt.Fprintf(ch.w, "preset %s\n", arg)
		return renderPermissions(ch.w, p)
	}
	fmt.Fprintf(ch.w, "/permissions takes ask, never, a preset (%s) or nothing\n", strings.Join(wire.Presets, ", "))
	return nil
}
