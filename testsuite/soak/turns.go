package soak

// The turn loop of the soak: sessions whose agent runs turns (the Followup
// update, the worker's scripted provider, the built-in tools in a
// temporary cwd) while the worker is killed, and the checks of their logs.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	temporalclient "go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/provider"
	"github.com/sessionflow/sessionflow/provider/scripted"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// TurnNotes is the content every turn's write_file call writes and its
// read_file call must read back.
const TurnNotes = "soak notes"

// idempotentTools are the built-in tools the turn script calls that may
// re-run when their outcome is unknown; any other name is not idempotent.
var idempotentTools = map[string]bool{"read_file": true, "write_file": true, "list_dir": true}

// turnScript is the worker's provider script: every turn is a step that
// writes, reads and lists in the cwd and calls a tool the worker does not
// have (so a retry after its tool/call was stored must give it the
// TOOL_OUTCOME_UNKNOWN result rather than run it), then a step that
// answers. The responses stream in small delayed chunks so that kills land
// mid-stream.
func turnScript() scripted.Script {
	return scripted.Script{Loop: true, Responses: []scripted.Response{
		{
			Text: "Let me look at the notes.", ChunkSize: 4, DelayMs: 5,
			ToolCalls: []scripted.Call{
				{ID: "w", Name: "write_file", Arguments: fmt.Sprintf(`{"path":"notes.txt","content":%q}`, TurnNotes)},
				{ID: "r", Name: "read_file", Arguments: `{"path":"notes.txt"}`},
				{ID: "l", Name: "list_dir", Arguments: `{}`},
				{ID: "x", Name: "erase_disk", Arguments: `{}`},
			},
			Usage: &provider.Usage{InputTokens: 10, OutputTokens: 5},
		},
		{Text: "The notes are in place.", ChunkSize: 3, DelayMs: 5},
	}}
}

// writeTurnScript writes the provider script into the run's directory.
func (f *fleet) writeTurnScript() (string, error) {
	b, err := turnScript().Marshal()
	if err != nil {
		return "", fmt.Errorf("soak: the provider script: %w", err)
	}
	path := filepath.Join(f.dir, "provider-script.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return "", fmt.Errorf("soak: the provider script: %w", err)
	}
	return path, nil
}

// turnDriver owns the turn sessions: it creates them, runs their turn
// loops, checks their logs and resumes them at the end.
type turnDriver struct {
	r        *runner
	sessions []*turnSession
}

// turnSession is one session of the turn loop.
type turnSession struct {
	id  string
	cwd string
	// ended counts the turns seen ended (read by the progress lines while
	// the loop runs).
	ended atomic.Int64
}

// create creates the turn sessions, each with its own cwd.
func (d *turnDriver) create(ctx context.Context) error {
	for i := 0; i < d.r.cfg.Turns; i++ {
		t := &turnSession{id: fmt.Sprintf("soak-%d-t%03d", d.r.cfg.Seed, i), cwd: filepath.Join(d.r.fleet.dir, "cwd", fmt.Sprint(i))}
		if err := os.MkdirAll(t.cwd, 0o755); err != nil {
			return fmt.Errorf("soak: turn session cwd: %w", err)
		}
		cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		_, err := d.r.cl.Create(cctx, wire.CreateSessionRequest{
			SessionID: t.id, Options: d.r.options(), Meta: &wire.SessionMeta{Cwd: t.cwd},
			AgentOptions: &wire.AgentOptions{Provider: "scripted", Model: "soak"},
		})
		cancel()
		if err != nil {
			return fmt.Errorf("soak: creating turn session %s: %w", t.id, err)
		}
		d.sessions = append(d.sessions, t)
	}
	d.r.rep.progress("%d turn sessions created", len(d.sessions))
	return nil
}

// ended returns the number of turns the turn loops saw ended.
func (d *turnDriver) ended() int64 {
	var n int64
	for _, t := range d.sessions {
		n += t.ended.Load()
	}
	return n
}

// loop asks t's agent for one turn after another until stop closes,
// each time waiting until the turn that claimed the message has ended.
func (d *turnDriver) loop(ctx context.Context, t *turnSession, stop <-chan struct{}) {
	for n := 1; !stopped(ctx, stop); n++ {
		msgID := fmt.Sprintf("%s-m%04d", t.id, n)
		if err := d.followup(ctx, t.id, msgID, n); err != nil {
			if ctx.Err() == nil {
				d.r.rep.fail("turn session %s: %v", t.id, err)
			}
			return
		}
		if err := d.awaitTurnEnd(ctx, t.id, msgID); err != nil {
			if ctx.Err() == nil {
				d.r.rep.fail("turn session %s: %v", t.id, err)
			}
			return
		}
		t.ended.Add(1)
	}
}

// followup sends the Followup update with a fixed update id, retried
// across the kills until accepted: a retry of an accepted update gets its
// outcome rather than queuing the message twice.
func (d *turnDriver) followup(ctx context.Context, id, msgID string, n int) error {
	content, _ := json.Marshal(fmt.Sprintf("Turn request %d: check the notes.", n))
	req := wire.InputRequest{MessageID: msgID, Content: content}
	deadline := time.Now().Add(d.r.cfg.BatchDeadline)
	for {
		actx, cancel := context.WithTimeout(ctx, d.r.cfg.AppendTimeout)
		h, err := d.r.tc.UpdateWorkflow(actx, temporalclient.UpdateWorkflowOptions{
			UpdateID: "followup-" + msgID, WorkflowID: wire.WorkflowID(id),
			UpdateName: wire.UpdateFollowup, Args: []any{req},
			WaitForStage: temporalclient.WorkflowUpdateStageCompleted,
		})
		if err == nil {
			var res wire.InputResult
			err = h.Get(actx, &res)
		}
		cancel()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case time.Now().After(deadline):
			return fmt.Errorf("followup %s not accepted within %v: %w", msgID, d.r.cfg.BatchDeadline, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// awaitTurnEnd polls the store until the turn that stored the user
// message msgID has its turn/end.
func (d *turnDriver) awaitTurnEnd(ctx context.Context, id, msgID string) error {
	deadline := time.Now().Add(d.r.cfg.BatchDeadline)
	for {
		events, err := d.r.read(ctx, id)
		if err == nil && turnOfMessageEnded(events, msgID) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the turn of message %s has not ended within %v (read error %v)", msgID, d.r.cfg.BatchDeadline, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// turnOfMessageEnded reports whether events hold the user/message msgID
// inside a turn that has ended.
func turnOfMessageEnded(events []session.Event, msgID string) bool {
	turn, claimed := int64(0), int64(0)
	for _, e := range events {
		switch e.Type {
		case wire.TypeTurnStart:
			if ts, err := e.TurnStart(); err == nil {
				turn = ts.Turn
			}
		case wire.TypeUserMessage:
			var m struct {
				ID string `json:"id"`
			}
			if json.Unmarshal(e.Data, &m) == nil && m.ID == msgID {
				claimed = turn
			}
		case wire.TypeTurnEnd:
			if te, err := e.TurnEnd(); err == nil && claimed != 0 && te.Turn == claimed {
				return true
			}
		}
	}
	return false
}

// TurnFigures are the counts of a turn session's log.
type TurnFigures struct {
	// Turns is the number of turns ended, ModelCalls the number of
	// assistant messages, ToolCalls the number of tool calls.
	Turns, ModelCalls, ToolCalls int
	// OutcomeUnknown is the number of tool results that are the
	// TOOL_OUTCOME_UNKNOWN result of a call that must not run again.
	OutcomeUnknown int
}

// checkTurnLog checks one turn session's log: contiguous seqs; turns and
// steps nested and closed (after the run, open is allowed only for the
// last turn while it runs); exactly one assistant/message per (turn,
// step); every tool/call once per call id in its turn and answered by
// exactly one tool/result (sourceEventSeqs [its seq]) before its step
// ends; an idempotent tool's result is never TOOL_OUTCOME_UNKNOWN (it is
// run again) and its read finds what the write wrote; a non-idempotent
// call is answered by its first run or TOOL_OUTCOME_UNKNOWN, never run
// twice; every turn ends "completed" (or "interrupted" by a resume's
// closers). It returns the problems found.
func checkTurnLog(events []session.Event, final bool) (TurnFigures, []string) {
	var fig TurnFigures
	var bad []string
	add := func(f string, args ...any) {
		if len(bad) < 20 {
			bad = append(bad, fmt.Sprintf(f, args...))
		}
	}
	type callKey struct {
		turn int64
		id   string
	}
	turn, step := int64(0), int64(0)
	messages := map[[2]int64]int{}
	calls := map[callKey]wire.ToolCall{}
	callSeq := map[callKey]int64{}
	results := map[callKey]int{}
	pending := map[callKey]bool{}
	for i, e := range events {
		if e.Seq != int64(i) {
			add("seq %d at index %d: the log is not contiguous", e.Seq, i)
			return fig, bad
		}
		switch e.Type {
		case wire.TypeTurnStart:
			ts, err := e.TurnStart()
			if err != nil {
				add("turn/start@%d: %v", e.Seq, err)
				continue
			}
			if turn != 0 {
				add("turn/start@%d inside turn %d", e.Seq, turn)
			}
			turn, step = ts.Turn, 0
		case wire.TypeStepStart:
			ss, err := e.StepStart()
			if err != nil || turn == 0 || step != 0 || ss.Turn != turn {
				add("step/start@%d out of place (turn %d, step %d, err %v)", e.Seq, turn, step, err)
				continue
			}
			step = ss.Step
		case wire.TypeAssistantMessage:
			m, err := e.AssistantMessage()
			if err != nil || m.Turn != turn || m.Step != step || step == 0 {
				add("assistant/message@%d out of place (turn %d, step %d, err %v)", e.Seq, turn, step, err)
				continue
			}
			fig.ModelCalls++
			if messages[[2]int64{turn, step}]++; messages[[2]int64{turn, step}] > 1 {
				add("a second assistant/message@%d for turn %d step %d", e.Seq, turn, step)
			}
		case wire.TypeToolCall:
			tc, err := e.ToolCall()
			if err != nil || tc.Turn != turn || tc.Step != step || step == 0 {
				add("tool/call@%d out of place (turn %d, step %d, err %v)", e.Seq, turn, step, err)
				continue
			}
			k := callKey{turn, tc.CallID}
			if _, dup := calls[k]; dup {
				add("a second tool/call@%d for call %q of turn %d", e.Seq, tc.CallID, turn)
				continue
			}
			fig.ToolCalls++
			calls[k], callSeq[k], pending[k] = tc, e.Seq, true
		case wire.TypeToolResult:
			tr, err := e.ToolResult()
			if err != nil {
				add("tool/result@%d: %v", e.Seq, err)
				continue
			}
			k := callKey{turn, tr.Message.Source.CallID}
			tc, ok := calls[k]
			switch {
			case !ok:
				add("tool/result@%d for call %q of turn %d without its tool/call", e.Seq, k.id, turn)
				continue
			case len(e.SourceEventSeqs) != 1 || e.SourceEventSeqs[0] != callSeq[k]:
				add("tool/result@%d for call %q: sourceEventSeqs %v, not [%d]", e.Seq, k.id, e.SourceEventSeqs, callSeq[k])
			}
			if results[k]++; results[k] > 1 {
				add("a second tool/result@%d for call %q of turn %d", e.Seq, k.id, turn)
			}
			delete(pending, k)
			code := ""
			if tr.Error != nil {
				code = tr.Error.Code
			}
			text := ""
			if len(tr.Message.Content) > 0 {
				for _, b := range tr.Message.Content[0].Content {
					text += b.Text
				}
			}
			switch {
			case code == session.ToolOutcomeUnknown && idempotentTools[tc.Name]:
				add("tool/result@%d: the idempotent %s call %q got TOOL_OUTCOME_UNKNOWN instead of a re-run", e.Seq, tc.Name, k.id)
			case code == session.ToolOutcomeUnknown:
				fig.OutcomeUnknown++
			case tc.Name == "read_file" && (code != "" || text != TurnNotes):
				add("tool/result@%d: read_file of turn %d read %q (code %q), not the notes the turn wrote", e.Seq, turn, text, code)
			case tc.Name == "write_file" && code != "":
				add("tool/result@%d: write_file of turn %d failed: %s %q", e.Seq, turn, code, text)
			case !idempotentTools[tc.Name] && code != "TOOL_NOT_FOUND":
				add("tool/result@%d: %s call %q of turn %d: code %q, neither its run's TOOL_NOT_FOUND nor TOOL_OUTCOME_UNKNOWN", e.Seq, tc.Name, k.id, turn, code)
			}
		case wire.TypeStepEnd:
			if turn == 0 || step == 0 {
				add("step/end@%d outside a step", e.Seq)
			}
			for k := range pending {
				add("step/end@%d with call %q of turn %d unanswered", e.Seq, k.id, k.turn)
				delete(pending, k)
			}
			if step != 0 && messages[[2]int64{turn, step}] != 1 {
				add("step %d of turn %d closed with %d assistant messages", step, turn, messages[[2]int64{turn, step}])
			}
			step = 0
		case wire.TypeTurnEnd:
			te, err := e.TurnEnd()
			if err != nil || turn == 0 || step != 0 || te.Turn != turn {
				add("turn/end@%d out of place (turn %d, step %d, err %v)", e.Seq, turn, step, err)
			} else if k := te.Reason.Kind; k != wire.TurnEndCompleted && k != wire.TurnEndInterrupted {
				add("turn %d ended %q: %s", turn, k, e.Data)
			}
			fig.Turns++
			turn = 0
		}
	}
	if final && turn != 0 {
		add("turn %d is still open", turn)
	}
	return fig, bad
}

// check checks every turn session's log; it returns their figures.
func (d *turnDriver) check(ctx context.Context, final bool) TurnFigures {
	var all TurnFigures
	for _, t := range d.sessions {
		events, err := d.r.read(ctx, t.id)
		if err != nil {
			d.r.rep.fail("turn session %s does not open for read (final=%v): %v", t.id, final, err)
			continue
		}
		fig, bad := checkTurnLog(events, final)
		for _, b := range bad {
			d.r.rep.fail("turn session %s (final=%v): %s", t.id, final, b)
		}
		if ended := int(t.ended.Load()); final && fig.Turns < ended {
			d.r.rep.fail("turn session %s: %d turns ended in the log, %d seen ended", t.id, fig.Turns, ended)
		}
		all.Turns += fig.Turns
		all.ModelCalls += fig.ModelCalls
		all.ToolCalls += fig.ToolCalls
		all.OutcomeUnknown += fig.OutcomeUnknown
	}
	return all
}

// AgentRetries counts the agent activities of the turn sessions that ran
// more than one attempt (the earlier ones lost with a killed worker), from
// the workflows' histories.
type AgentRetries struct {
	// Model and Tool count the CallModel and RunTool activities retried.
	Model, Tool int
}

// agentRetries reads every run of every turn session's workflow, newest
// first along the continue-as-new chain, and counts the agent activities
// whose last started attempt was not the first.
func (d *turnDriver) agentRetries(ctx context.Context) (AgentRetries, error) {
	var n AgentRetries
	for _, t := range d.sessions {
		runID := ""
		for {
			it := d.r.tc.GetWorkflowHistory(ctx, wire.WorkflowID(t.id), runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
			scheduled := map[int64]string{}
			previous := ""
			for it.HasNext() {
				e, err := it.Next()
				if err != nil {
					return n, fmt.Errorf("the history of session %s: %w", t.id, err)
				}
				if a := e.GetWorkflowExecutionStartedEventAttributes(); a != nil {
					previous = a.GetContinuedExecutionRunId()
				}
				if a := e.GetActivityTaskScheduledEventAttributes(); a != nil {
					scheduled[e.GetEventId()] = a.GetActivityType().GetName()
				}
				if a := e.GetActivityTaskStartedEventAttributes(); a != nil && a.GetAttempt() > 1 {
					switch scheduled[a.GetScheduledEventId()] {
					case wire.CallModelActivity:
						n.Model++
					case wire.RunToolActivity:
						n.Tool++
					}
				}
			}
			if previous == "" {
				break
			}
			runID = previous
		}
	}
	return n, nil
}

// resume disposes every turn session (idle once its loop
// ended), then resumes and disposes it again; it returns the number that
// could not be resumed.
func (d *turnDriver) resume(ctx context.Context) int {
	var ts []*tracked
	for _, t := range d.sessions {
		if err := d.r.dispose(ctx, t.id); err != nil {
			d.r.rep.fail("turn session %s: final dispose: %v", t.id, err)
		}
		ts = append(ts, newTracked(t.id))
	}
	unresumable := d.r.resumeAndDispose(ctx, ts, "turn session")
	d.r.rep.progress("%d turn sessions disposed, resumed and disposed again (%d unresumable)", len(ts), unresumable)
	return unresumable
}
