package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/wire"
)

// defaultChatRoot is the worker's default store root, which chat reads when
// neither --root nor $SESSIONFLOW_ROOT is given and it exists.
const defaultChatRoot = "./.sessionflow/store"

// quickInterrupt is how soon a second Ctrl-C during a turn leaves the chat.
const quickInterrupt = 2 * time.Second

const chatHelp = `Type a prompt and press Enter: the answer streams as it comes, one line per
tool call. While a turn runs you may type too (a prompt is queued for the next
turn, /steer and /inject reach the running one).

  /steer TEXT    a message for the next step of the running turn (idle: starts a turn)
  /inject TEXT   a message for the next step, without waking the agent
  /history       the conversation so far
  /compact       summarise the earlier conversation, to free the model's context
                 (the log keeps every event; Ctrl-C cancels it)
  /permissions   the session's sandbox and approval permissions
  /permissions ask|never|read-only|workspace-write|danger-full-access
                 switch the approval policy, between turns: under ask,
                 run_command and write_file calls wait for your approval
  /detach        leave, keeping the session live
  /quit          leave, disposing the session (so do Ctrl-D and Ctrl-C at the prompt)
  /help          this text

A tool call waiting for your approval shows its tool, the reason and its
arguments, and asks "Allow? [y]es / [n]o / [a]lways:": y runs it once, n
rejects it, a runs it and, from then on, calls like it (run_command: the same
first words; write_file: the same directory; another tool: any call).

Ctrl-C during a turn or a /compact cancels it; a second Ctrl-C leaves, disposing
the session.
`

func newChatCmd(a *app) *cobra.Command {
	var id, cwd string
	var route routeFlags
	var conn *connFlags
	sf := &storeFlags{}
	cmd := &cobra.Command{
		Use:   "chat --id ID [--provider P --model M]",
		Short: "Talk to a session's agent in the terminal",
		Long: `Open an interactive chat on session ID: attach to it when it is live,
resume it when it is stored, create it (in --cwd, default the current
directory) otherwise. --provider and --model set the agent's route when the
session is created or resumed.

` + chatHelp + `
With the store root (--root DIR, $` + envRoot + `, or ` + defaultChatRoot + ` when it
exists: the worker's default, read on the worker's machine) tool lines show
the call's arguments and result size, and /history works.` + lifecycleNote,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := requireID(id); err != nil {
				return err
			}
			if err := route.validate(); err != nil {
				return err
			}
			if cwd == "" {
				wd, err := os.Getwd()
				if err != nil {
					return err
				}
				cwd = wd
			} else if abs, err := filepath.Abs(cwd); err == nil {
				cwd = abs
			}
			if !a.hasRoot(sf) {
				if fi, err := os.Stat(defaultChatRoot); err == nil && fi.IsDir() {
					sf.root = defaultChatRoot
				}
			}
			reader, err := a.optionalReader(sf)
			if err != nil {
				return err
			}
			// The chat answers SIGINT itself: it cancels the running turn.
			cmd.SetContext(context.WithoutCancel(cmd.Context()))
			return a.withClient(cmd, conn, func(ctx context.Context, c *client.Client) error {
				ch := &chat{a: a, c: c, id: id, reader: reader, live: a.optionalLive(sf), w: a.stdout}
				return ch.run(ctx, cwd, route)
			})
		},
	}
	conn = addConnFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&id, "id", "", "session id (required)")
	fs.StringVar(&cwd, "cwd", "", "working directory of a session the chat creates (default: the current directory)")
	route.add(fs)
	sf.addRoot(fs, "store root, to show tool arguments and results and the history (default $"+envRoot+", else "+defaultChatRoot+" when it exists)")
	return cmd
}

// chat is one interactive chat on a session.
type chat struct {
	a      *app
	c      *client.Client
	id     string
	reader client.EventReader
	// live follows the running model call's text; nil without a root.
	live client.LiveSource
	w    io.Writer
	in   *chatInput

	// cursor is the seq from which the events of the running turn are read.
	cursor int64
	// queue holds the ids of queued prompts whose turns the chat follows.
	queue []string
	// lastInterrupt is when the last Ctrl-C cancelled a turn.
	lastInterrupt time.Time
}

// leaveRequest ends the chat; dispose says whether the session is
// disposed.
type leaveRequest struct{ dispose bool }

func (l *leaveRequest) Error() string { return "leave" }

func (ch *chat) run(ctx context.Context, cwd string, route routeFlags) error {
	ch.in = newChatInput(ch.a.stdin, ch.w)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		for {
			select {
			case s := <-sigs:
				if s == os.Interrupt {
					ch.in.interrupt()
				} else {
					cancel()
				}
			case <-ctx.Done():
				return
			}
		}
	}()

	if err := ch.open(ctx, cwd, route); err != nil {
		return err
	}
	fmt.Fprintln(ch.w, "type a prompt; /help lists the commands; Ctrl-C cancels a turn, Ctrl-C at the prompt leaves")
	for {
		if len(ch.queue) > 0 {
			// Turns the chat follows before it prompts (a running turn it
			// attached to).
			msg := ch.queue[0]
			ch.queue = ch.queue[1:]
			if err := ch.follow(ctx, msg); err != nil {
				var leave *leaveRequest
				if errors.As(err, &leave) {
					return ch.leave(ctx, leave.dispose)
				}
				fmt.Fprintf(ch.w, "error: %s\n", errorText(err))
			}
			continue
		}
		line, err := ch.in.readLine(ctx)
		if err != nil {
			// Ctrl-C or Ctrl-D at the prompt, the end of the input, SIGTERM;
			// an input that cannot be read any more leaves too.
			if !errors.Is(err, errInterrupted) && !errors.Is(err, io.EOF) && ctx.Err() == nil {
				fmt.Fprintf(ch.w, "error: read the input: %s\n", errorText(err))
			}
			return ch.leave(ctx, true)
		}
		err = ch.handle(ctx, strings.TrimSpace(line), false)
		var leave *leaveRequest
		switch {
		case err == nil:
			continue
		case errors.As(err, &leave):
			return ch.leave(ctx, leave.dispose)
		case ctx.Err() != nil:
			return ch.leave(ctx, true)
		default:
			// A failed command (a refused prompt, a lost connection) is
			// reported; the chat goes on.
			fmt.Fprintf(ch.w, "error: %s\n", errorText(err))
		}
	}
}

// open attaches to the live session, or resumes or creates it.
func (ch *chat) open(ctx context.Context, cwd string, route routeFlags) error {
	d, err := ch.c.Temporal().DescribeWorkflow(ctx, wire.WorkflowID(ch.id), "")
	var nf *serviceerror.NotFound
	switch {
	case err == nil && d.RawResponse.GetWorkflowExecutionInfo().GetStatus() == enums.WORKFLOW_EXECUTION_STATUS_RUNNING:
		st, err := ch.c.LoopState(ctx, ch.id)
		if err != nil {
			return err
		}
		ch.cursor = st.NextSeq
		fmt.Fprintf(ch.w, "attached to live session %q (%d turns, agent %s)\n", ch.id, st.LastTurn, termText(st.State, false))
		if route.provider != "" || route.model != "" {
			fmt.Fprintln(ch.w, "note: --provider and --model apply when a session is created or resumed; the live session keeps its route")
		}
		if route.sandboxMode != "" || route.network || route.approvalPolicy != "" || route.preset != "" || route.approvalTimeout != 0 {
			fmt.Fprintln(ch.w, "note: --sandbox-mode, --network, --preset and --approval-* apply when a session is created or resumed; /permissions shows and changes the live session's")
		}
		// A turn already running is followed like one of the chat's own.
		if n := len(st.Recent); st.State == "running" && n > 0 && st.Recent[n-1].Reason == nil && len(st.Recent[n-1].Claimed) > 0 {
			running := st.Recent[n-1]
			ch.cursor = running.StartSeq
			ch.queue = append(ch.queue, running.Claimed[0])
		}
		return nil
	case err != nil && !errors.As(err, &nf):
		return fmt.Errorf("describe the workflow of session %q: %w", ch.id, err)
	}
	s, err := ch.c.Resume(ctx, ch.id, wire.ResumeSessionRequest{AgentOptions: route.options()})
	how := "resumed"
	if errors.Is(err, wire.ErrNotFound) {
		how = "created"
		s, err = ch.c.Create(ctx, wire.CreateSessionRequest{SessionID: ch.id, Meta: &wire.SessionMeta{Cwd: cwd}, AgentOptions: route.options()})
	}
	if err != nil {
		return err
	}
	ch.cursor = s.NextSeq
	fmt.Fprintf(ch.w, "session %q %s (cwd %s, %d turns)\n", ch.id, how, orDash(termText(s.Header.Cwd, false)), s.LastTurn)
	return nil
}

// leave ends the chat, disposing the session unless asked not to.
func (ch *chat) leave(ctx context.Context, dispose bool) error {
	if !dispose {
		fmt.Fprintf(ch.w, "detached; session %q stays live\n", ch.id)
		return nil
	}
	fmt.Fprintf(ch.w, "disposing session %q…\n", ch.id)
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if _, err := ch.c.Dispose(dctx, ch.id); err != nil {
		return err
	}
	fmt.Fprintf(ch.w, "session %q disposed\n", ch.id)
	return nil
}

// handle acts on one line; running says a turn is being followed (a prompt
// is then queued, a /steer does not start one).
func (ch *chat) handle(ctx context.Context, line string, running bool) error {
	if line == "" {
		return nil
	}
	cmd, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	if !strings.HasPrefix(cmd, "/") {
		cmd, arg = "", line
	}
	switch cmd {
	case "/help":
		fmt.Fprint(ch.w, chatHelp)
	case "/quit", "/exit":
		return &leaveRequest{dispose: true}
	case "/detach":
		return &leaveRequest{}
	case "/history":
		return ch.history(ctx)
	case "/compact":
		switch {
		case arg != "":
			fmt.Fprintln(ch.w, "/compact takes no argument")
		case running:
			fmt.Fprintln(ch.w, "/compact runs between turns: type it again when the turn has ended")
		default:
			return ch.compact(ctx)
		}
	case "/permissions":
		return ch.permissions(ctx, arg, running)
	case "/inject", "/steer", "":
		if arg == "" {
			fmt.Fprintf(ch.w, "%s needs a message\n", cmd)
			return nil
		}
		content, _ := json.Marshal(arg)
		req := wire.InputRequest{Content: content}
		var res wire.InputResult
		var err error
		switch cmd {
		case "/inject":
			res, err = ch.c.Inject(ctx, ch.id, req)
		case "/steer":
			res, err = ch.c.Steer(ctx, ch.id, req)
		default:
			res, err = ch.c.Followup(ctx, ch.id, req)
		}
		if err != nil {
			return err
		}
		switch {
		case cmd == "/inject" && res.SplicedSeq >= 0:
			fmt.Fprintf(ch.w, "injected %s: stored (seq %d) for the next turn's first step\n", displayText(res.MessageID), res.SplicedSeq)
		case cmd == "/inject":
			fmt.Fprintf(ch.w, "injected %s for the next step of turn %d\n", displayText(res.MessageID), res.Turn)
		case cmd == "/steer" && res.Turn > 0:
			fmt.Fprintf(ch.w, "steering turn %d: %s joins its next step\n", res.Turn, displayText(res.MessageID))
		case running:
			ch.queue = append(ch.queue, res.MessageID)
			fmt.Fprintf(ch.w, "queued %s for the next turn\n", displayText(res.MessageID))
		default:
			return ch.follow(ctx, res.MessageID)
		}
	default:
		fmt.Fprintf(ch.w, "unknown command %s; /help lists them\n", displayText(cmd))
	}
	return nil
}

// follow prints the turn that claims messageID as it runs, then the turns
// of the prompts queued meanwhile.
func (ch *chat) follow(ctx context.Context, messageID string) error {
	ch.queue = append(ch.queue, messageID)
	for len(ch.queue) > 0 {
		msg := ch.queue[0]
		ch.queue = ch.queue[1:]
		if err := ch.watch(ctx, msg); err != nil {
			return err
		}
	}
	return nil
}

// progressItem is one value of WatchTurn.
type progressItem struct {
	p   client.TurnProgress
	err error
}

// cancelOutcome is the answer to a CancelTurn.
type cancelOutcome struct {
	res wire.CancelResult
	err error
}

// watch follows one turn; Ctrl-C cancels it, a second one leaves.
func (ch *chat) watch(ctx context.Context, msg string) error {
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	items := make(chan progressItem)
	go func() {
		defer close(items)
		for p, err := range ch.c.WatchTurn(wctx, ch.id, msg, client.WatchOptions{Events: ch.reader, Live: ch.live}) {
			select {
			case items <- progressItem{p, err}:
			case <-wctx.Done():
				return
			}
		}
	}()
	view := newTurnView(ch)
	q := &asker{ch: ch, view: view}
	var cancelled chan cancelOutcome
	// Lines typed while the turn runs: on a terminal, and, from piped
	// input (read between turns otherwise), the answers to approvals.
	var chunks <-chan []byte
	var stdinErr chan error
	ended := false
	listen := func() {
		if ended || !(ch.in.terminal || q.asking()) {
			chunks, stdinErr = nil, nil
			return
		}
		ch.in.pump()
		chunks, stdinErr = ch.in.chunks, ch.in.errc
	}
	listen()
	for {
		select {
		case it, ok := <-items:
			if !ok {
				return ch.awaitCancel(cancelled)
			}
			if it.err != nil {
				view.newline()
				if ctx.Err() != nil {
					return &leaveRequest{dispose: true}
				}
				fmt.Fprintf(ch.w, "error: %s\n", errorText(it.err))
				return ch.awaitCancel(cancelled)
			}
			view.show(ctx, it.p)
			switch it.p.Kind {
			case client.ProgressApproval:
				q.add(*it.p.Approval)
			case client.ProgressToolStarted, client.ProgressToolFinished:
				q.settled(it.p.Call.ID)
			}
			// Piped lines already read may answer it.
			if err := ch.typed(ctx, q); err != nil {
				return err
			}
			listen()
		case <-ch.in.interrupts:
			view.newline()
			if cancelled != nil || time.Since(ch.lastInterrupt) < quickInterrupt {
				fmt.Fprintln(ch.w, "^C again: leaving")
				return &leaveRequest{dispose: true}
			}
			ch.lastInterrupt = time.Now()
			fmt.Fprintln(ch.w, "^C cancelling the turn (Ctrl-C again to leave)")
			cancelled = make(chan cancelOutcome, 1)
			go func() {
				res, err := ch.c.CancelTurn(ctx, ch.id, "user", false)
				cancelled <- cancelOutcome{res, err}
			}()
		case b := <-chunks:
			ch.in.pending = append(ch.in.pending, b...)
			if err := ch.typed(ctx, q); err != nil {
				return err
			}
			listen()
		case err := <-stdinErr:
			ch.in.errc <- err // the prompt sees the end too
			ended = true
			listen()
			// The input read before its end waits in the channel still
			// (the reader sends it first): it comes first.
			ch.in.drain()
			if err := ch.typed(ctx, q); err != nil {
				return err
			}
			if q.asking() && len(ch.in.pending) > 0 {
				// A last line without a newline answers.
				line := string(ch.in.pending)
				ch.in.pending = nil
				if err := q.answer(ctx, line); err != nil {
					return err
				}
			}
			if q.asking() {
				view.newline()
				fmt.Fprintf(ch.w, "the input ended while call %s waits for approval: leaving\n", displayText(q.queue[0].CallID))
				return &leaveRequest{dispose: true}
			}
		case <-ctx.Done():
			return &leaveRequest{dispose: true}
		}
	}
}

// typed acts on the complete lines received during the turn: the answer
// to the open question, or a command (from a terminal; piped lines that
// answer nothing wait for the prompt).
func (ch *chat) typed(ctx context.Context, q *asker) error {
	for ch.in.terminal || q.asking() {
		line, ok := ch.in.takeLine()
		if !ok {
			return nil
		}
		if q.asking() {
			if err := q.answer(ctx, line); err != nil {
				return err
			}
			continue
		}
		q.view.newline()
		if err := ch.handle(ctx, strings.TrimSpace(line), true); err != nil {
			var leave *leaveRequest
			if errors.As(err, &leave) {
				return err
			}
			fmt.Fprintf(ch.w, "error: %s\n", errorText(err))
		}
	}
	return nil
}

// awaitCancel waits for the answer of a CancelTurn sent during the turn and
// forgets the queued prompts it discarded.
func (ch *chat) awaitCancel(cancelled chan cancelOutcome) error {
	if cancelled == nil {
		return nil
	}
	o := <-cancelled
	if o.err != nil {
		fmt.Fprintf(ch.w, "cancel: %s\n", errorText(o.err))
		return nil
	}
	if len(o.res.Discarded) > 0 {
		ch.queue = slices.DeleteFunc(ch.queue, func(id string) bool { return slices.Contains(o.res.Discarded, id) })
		fmt.Fprintf(ch.w, "discarded %d pending message(s)\n", len(o.res.Discarded))
	}
	return nil
}
