package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	temporalclient "go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/internal/app/devserver"
	"github.com/sessionflow/sessionflow/internal/app/procgroup"
	"github.com/sessionflow/sessionflow/internal/lib/randhex"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// demoFlags configure the Temporal demo.
type demoFlags struct {
	address, namespace string
	root, compression  string
	worker             string
	provider, model    string
}

func newDemoCmd(a *app) *cobra.Command {
	df := &demoFlags{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run an agent's turn through two worker crashes, on an embedded Temporal server",
		Long: `Run the true story of a durable session: start the embedded Temporal dev
server (unless --address names a server), build the worker (go build ./worker
in this checkout, unless --worker or $` + envWorkerBinary + ` names a binary) and run
it as a separate process with the scripted model and the run_command tool.
Create a session and send a prompt. The model streams its answer and asks to
run the test suite (run_command "sleep 5 && echo ..."):

  - the worker is killed with SIGKILL while the model streams: a new worker
    process takes over and the model call runs again (a model call is
    idempotent: nothing was stored, exactly one assistant message is);
  - the new worker is killed with SIGKILL while the command runs: a third
    worker takes over, and since run_command is not idempotent it is not run
    again: its result is TOOL_OUTCOME_UNKNOWN, and the model answers that.

Every event is written by the workflows and the agent's activities; the demo
only sends the prompt, kills and starts workers, disposes the session and
prints the final log.

With --model (and ANTHROPIC_API_KEY or OPENAI_API_KEY, or --provider) the
same story runs against the real model service: a system prompt asks the
model to run the same command; whether it streams text before the call (the
first kill) is up to it.

The first run on a machine builds the Temporal CLI dev server from tools/
(about 6 minutes on 2 cores); later runs start in seconds (the worker build
is then a link from Go's build cache).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runTemporalDemo(cmd.Context(), a, df)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&df.address, "address", "", "use the Temporal server at host:port instead of the embedded one")
	fs.StringVar(&df.namespace, "namespace", defaultNamespace, "namespace on the server given by --address")
	fs.StringVar(&df.root, "root", "", "store root (default: a new temporary directory)")
	fs.StringVar(&df.compression, "compression", "", "encoding of the store root: none or zstd (default: the root's marker, else zstd)")
	fs.StringVar(&df.worker, "worker", "", "a built worker binary (default $"+envWorkerBinary+", else go build ./worker)")
	fs.StringVar(&df.provider, "provider", "", "run the story against a real model service (openai or anthropic) instead of the scripted model")
	fs.StringVar(&df.model, "model", "", "the real service's model (with OPENAI_API_KEY or ANTHROPIC_API_KEY)")
	return cmd
}

// demoSystemPrompt asks a real model to play the demo's part.
const demoSystemPrompt = "You are a coding agent in a demo of crash recovery. When asked to run the test suite, " +
	"say in one short sentence that you will run it, then call run_command with exactly this command: " +
	"sleep 5 && echo '42 tests passed' >> test-report.txt . After the tool result, say in two sentences what you know " +
	"about the outcome; if the outcome is unknown, do not run the command again."

// demoRoute resolves the demo's model route: the scripted model, or a real
// service chosen by --provider (or by which key is set) with --model.
func demoRoute(a *app, df *demoFlags) (provider, model string, workerArgs []string, err error) {
	if df.provider == "" && df.model == "" {
		return "scripted", "demo", nil, nil
	}
	provider = df.provider
	if provider == "" {
		switch {
		case a.getenv("ANTHROPIC_API_KEY") != "":
			provider = "anthropic"
		case a.getenv("OPENAI_API_KEY") != "":
			provider = "openai"
		default:
			return "", "", nil, usageErrorf("--model needs ANTHROPIC_API_KEY or OPENAI_API_KEY in the environment (or --provider)")
		}
	}
	if df.model == "" {
		return "", "", nil, usageErrorf("--provider %s needs --model", provider)
	}
	switch provider {
	case "anthropic":
		if a.getenv("ANTHROPIC_API_KEY") == "" {
			return "", "", nil, usageErrorf("--provider anthropic needs ANTHROPIC_API_KEY in the environment")
		}
		return provider, df.model, []string{"--anthropic", "--system-prompt", demoSystemPrompt}, nil
	case "openai":
		if a.getenv("OPENAI_API_KEY") == "" {
			return "", "", nil, usageErrorf("--provider openai needs OPENAI_API_KEY in the environment (OPENAI_BASE_URL for another endpoint)")
		}
		return provider, df.model, []string{"--openai", "--system-prompt", demoSystemPrompt}, nil
	}
	return "", "", nil, usageErrorf("--provider must be anthropic or openai, got %q", provider)
}

// demoScript is the scripted model of the demo: response 0 streams slowly
// (the first worker dies during it) and asks to run a slow command (the
// second worker dies during it); response 1 answers after the result.
const demoScript = `{"responses":[
  {"text":"I'll run the test suite first. It takes a few seconds, so bear with me.","chunkSize":4,"delayMs":250,
   "toolCalls":[{"id":"call-1","name":"run_command","arguments":{"command":"sleep 5 && echo '42 tests passed' >> test-report.txt"}}]},
  {"text":"The worker running the test suite died, so its outcome is unknown: it may or may not have run. I did not run it again on my own, since running it twice is not harmless in general; look at test-report.txt or ask me to run it again.","chunkSize":16,"delayMs":50}
]}`

func runTemporalDemo(ctx context.Context, a *app, df *demoFlags) (err error) {
	providerName, modelName, routeArgs, err := demoRoute(a, df)
	if err != nil {
		return err
	}
	scriptedModel := providerName == "scripted"
	if df.root == "" {
		if df.root, err = os.MkdirTemp("", "sessionflow-demo-"); err != nil {
			return err
		}
	}
	comp, err := rootCompression(df.root, df.compression, "--compression")
	if err != nil {
		return err
	}
	store, err := jsonl.NewStore(jsonl.Options{Root: df.root, Compression: comp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "sessionflow-demo-run-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cwd := filepath.Join(tmp, "project")
	script := filepath.Join(tmp, "script.json")
	if err := os.MkdirAll(cwd, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(script, []byte(demoScript), 0o644); err != nil {
		return err
	}
	// The first worker's model stalls after three chunks of its answer
	// until the worker is killed, so the kill lands mid-stream however late
	// the demo sees the text; the next workers' model streams it whole.
	firstScript := filepath.Join(tmp, "script-first-worker.json")
	if err := os.WriteFile(firstScript, []byte(strings.Replace(demoScript, `"delayMs":250,`, `"delayMs":250,"stall":{"afterChunks":3},`, 1)), 0o644); err != nil {
		return err
	}
	out := &demoOut{w: a.stdout}
	quiet := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	var tc temporalclient.Client
	address, namespace := df.address, df.namespace
	if df.address == "" {
		out.step("start the embedded Temporal dev server")
		srv, err := devserver.Start(ctx, devserver.Options{
			Ephemeral: true,
			UI:        true,
			Locate:    devserver.LocateOptions{Progress: a.stderr},
			Logger:    slog.New(slog.DiscardHandler),
		})
		if err != nil {
			return err
		}
		defer srv.Stop()
		fmt.Fprintf(a.stdout, "Temporal at %s, Web UI at %s (in memory: gone when the demo ends)\n", srv.Address(), srv.UIURL())
		tc, address, namespace = srv.Client(), srv.Address(), srv.Namespace()
	} else {
		out.step("connect to Temporal at %s", df.address)
		if tc, err = dialTemporal(ctx, temporalclient.Options{HostPort: df.address, Namespace: df.namespace, Logger: tlog.NewStructuredLogger(quiet)}); err != nil {
			return fmt.Errorf("connect to Temporal at %s: %w", df.address, err)
		}
		defer tc.Close()
	}

	given := df.worker
	if given == "" {
		given = a.getenv(envWorkerBinary)
	}
	bin, err := locateWorker(ctx, given, tmp, a.stderr)
	if err != nil {
		return err
	}
	taskQueue := "sessionflow-demo-" + randhex.String(4)
	workerArgs := append([]string{"--store-root", df.root, "--compression", string(comp), "--provider-script", script,
		"--enable-run-command", "--sticky-timeout", "1s"}, routeArgs...)
	workers := 0
	var current *procgroup.Process
	launch := func(n int) (*procgroup.Process, error) {
		args := workerArgs
		if n == 1 {
			args = slices.Clone(workerArgs)
			args[slices.Index(args, script)] = firstScript
		}
		return startWorkerProcess(ctx, tc, bin, address, namespace, taskQueue, fmt.Sprintf("demo-worker-%d", n), args)
	}
	started := func(w *procgroup.Process) {
		workers++
		current = w
		fmt.Fprintf(a.stdout, "worker %d (pid %d) polls task queue %s\n", workers, w.Pid(), taskQueue)
	}
	start := func() error {
		w, err := launch(workers + 1)
		if err != nil {
			return err
		}
		started(w)
		return nil
	}
	kill := func(when string) {
		fmt.Fprintf(a.stdout, "\n!! SIGKILL worker %d (pid %d) %s\n", workers, current.Pid(), when)
		current.Kill()
	}
	var shells *shellWatch // kills worker 2 once its run_command shell runs
	defer func() {
		if shells != nil {
			shells.stop()
		}
		if current != nil {
			current.Stop(15 * time.Second)
		}
	}()
	out.step("start worker process 1: the scripted model, the built-in tools and run_command")
	if err := start(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "store root %s (compression %s); the session's cwd is %s\n", df.root, comp, cwd)
	c := client.New(tc, client.Options{TaskQueue: taskQueue, Namespace: namespace})

	id := "demo-" + randhex.String(4)
	out.step("create session %q (workflow %s), its agent on %s model %s", id, wire.WorkflowID(id), providerName, modelName)
	if _, err := c.Create(ctx, wire.CreateSessionRequest{
		SessionID:    id,
		Meta:         &wire.SessionMeta{Cwd: cwd},
		AgentOptions: &wire.AgentOptions{Provider: providerName, Model: modelName},
		// A crashed worker's activities are retried after 3 s.
		Options: &wire.Options{HeartbeatTimeoutMs: 3000},
	}); err != nil {
		return err
	}
	if err := printDescription(ctx, a.stdout, c, id); err != nil {
		return err
	}

	prompt := "Run the test suite and tell me how it went."
	out.step("send a prompt (the Followup update): %q", prompt)
	content, _ := json.Marshal(prompt)
	in, err := c.Followup(ctx, id, wire.InputRequest{Content: content})
	if err != nil {
		return err
	}
	var info *wire.TurnInfo
	killedInStream, killedInTool := false, false
	commandShell := 0 // the pid of worker 2's run_command shell, once it was killed
	midLine := false
	newline := func() {
		if midLine {
			fmt.Fprintln(a.stdout)
			midLine = false
		}
	}
	shown := map[int64]string{} // the text printed per step
	textStep := int64(0)
	for p, err := range c.WatchTurn(ctx, id, in.MessageID, client.WatchOptions{Interval: 100 * time.Millisecond, Events: client.StoreReader(store)}) {
		if err != nil {
			return err
		}
		switch p.Kind {
		case client.ProgressText:
			if p.Step != textStep {
				newline()
				textStep = p.Step
			}
			if p.Gap {
				fmt.Fprint(a.stdout, "…")
				shown[p.Step] = ""
			}
			fmt.Fprint(a.stdout, termText(p.Text, true))
			shown[p.Step] += p.Text
			midLine = true
			if !killedInStream {
				killedInStream = true
				newline()
				kill("while the model streams its answer (the model call of step 1)")
				out.step("start worker process 2: the model call is retried there and streams again from the start")
				if err := start(); err != nil {
					return err
				}
				if procSupported() {
					shells = watchShell(ctx, current, func() (*procgroup.Process, error) { return launch(3) })
				}
				shown[p.Step] = ""
			}
		case client.ProgressToolStarted:
			newline()
			fmt.Fprintf(a.stdout, "→ %s (%s) running\n", displayText(p.Call.Name), displayText(p.Call.ID))
			if !killedInTool && p.Call.Name == "run_command" {
				killedInTool = true
				const while = "while run_command runs (sleep 5 && echo ... >> test-report.txt)"
				if shells != nil {
					// The watch killed worker 2 as soon as the command's
					// shell ran, and started worker 3 (the turn's watch
					// queries the session, which needs a worker).
					next, err := shells.result(ctx)
					if err != nil {
						return err
					}
					commandShell = shells.shell
					fmt.Fprintf(a.stdout, "\n!! SIGKILL worker %d (pid %d) %s: its shell (pid %d) was running\n", workers, current.Pid(), while, commandShell)
					out.step("start worker process 3: the tool call is retried there")
					started(next)
				} else {
					time.Sleep(time.Second) // no /proc to see it: the command is very likely under way
					kill(while)
					out.step("start worker process 3: the tool call is retried there")
					if err := start(); err != nil {
						return err
					}
				}
			}
		case client.ProgressToolFinished:
			newline()
			code := ""
			if p.Call.IsError {
				code = " " + termText(p.Call.Code, false)
			}
			fmt.Fprintf(a.stdout, "← %s (%s) finished%s\n", displayText(p.Call.Name), displayText(p.Call.ID), code)
		case client.ProgressEnded:
			// The answer's text that streamed after the last poll.
			answer := client.AnswerText(p.Events)
			if rest, ok := strings.CutPrefix(answer, shown[p.Info.Steps]); ok && rest != "" {
				if textStep != p.Info.Steps {
					newline()
				}
				fmt.Fprint(a.stdout, termText(rest, true))
				midLine = true
			}
			newline()
			fmt.Fprintf(a.stdout, "turn %d %s\n", p.Info.Turn, describeReason(p.Info))
			info = p.Info
		}
	}
	if info == nil {
		return fmt.Errorf("demo: the turn of session %q did not end", id)
	}
	if scriptedModel && (!killedInStream || !killedInTool) {
		return fmt.Errorf("demo: the turn ended before both crashes (killed while streaming: %t, while the tool ran: %t)", killedInStream, killedInTool)
	}

	out.step("what happened to the two interrupted calls (read from the log)")
	evs, err := readAll(ctx, store, id)
	if err != nil {
		return err
	}
	if err := explainCrashes(a.stdout, evs[info.StartSeq:info.EndSeq], killedInStream); err != nil {
		return err
	}
	// The killed command's shell was in its own process group: it may well
	// have finished after its worker died, which is why it is not re-run.
	// Its report is read once it has exited.
	if commandShell == 0 || !awaitExit(ctx, commandShell, time.Minute) {
		time.Sleep(3 * time.Second)
	}
	if b, err := os.ReadFile(filepath.Join(cwd, "test-report.txt")); err == nil {
		runs := strings.Count(string(b), "\n")
		fmt.Fprintf(a.stdout, "test-report.txt holds %d line(s): the command ran %d time(s); the first run went on after its worker died (its shell has its own process group): %q\n",
			runs, runs, strings.TrimSpace(string(b)))
	} else {
		fmt.Fprintln(a.stdout, "test-report.txt does not exist: the command died with its worker")
	}

	out.step("dispose: close the handle, release the lease")
	if _, err := c.Dispose(ctx, id); err != nil {
		return err
	}
	if lease, err := store.LeaseOf(ctx, id); err != nil {
		return err
	} else if lease != nil {
		return fmt.Errorf("demo: a lease is still held after dispose: %s", describeLease(lease))
	}
	fmt.Fprintln(a.stdout, "disposed; no lease held")

	out.step("the final log, one line per event (every one written by the workflows and the agent's activities)")
	if evs, err = readAll(ctx, store, id); err != nil {
		return err
	}
	if err := printEvents(a.stdout, evs); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%d events, seqs 0..%d contiguous\nthe whole log, as JSONL:\n  starter log cat --root %s --compression %s --id %s\n",
		len(evs), len(evs)-1, df.root, comp, id)
	return nil
}

// explainCrashes prints, from a turn's events, what became of the model
// call and the tool call the kills interrupted.
func explainCrashes(w io.Writer, evs []session.Event, killedInStream bool) error {
	messages := 0
	for _, e := range evs {
		switch e.Type {
		case wire.TypeAssistantMessage:
			m, err := e.AssistantMessage()
			if err != nil {
				return err
			}
			if m.Step == 1 {
				messages++
				if killedInStream {
					fmt.Fprintf(w, "model call of step 1: re-run on the next worker (idempotent); one assistant/message stored (seq %d)\n", e.Seq)
				}
			}
		case wire.TypeToolResult:
			r, err := e.ToolResult()
			if err != nil {
				return err
			}
			switch {
			case r.Error != nil && r.Error.Code == session.ToolOutcomeUnknown:
				fmt.Fprintf(w, "tool call %s: not run again on the next worker (the tool is not idempotent); tool/result seq %d: TOOL_OUTCOME_UNKNOWN\n", displayText(r.Message.Source.CallID), e.Seq)
			case r.Error != nil:
				fmt.Fprintf(w, "tool call %s: tool/result seq %d: %s\n", displayText(r.Message.Source.CallID), e.Seq, termText(r.Error.Code, false))
			default:
				fmt.Fprintf(w, "tool call %s: run again on the next worker (the tool is idempotent); tool/result seq %d: ok\n", displayText(r.Message.Source.CallID), e.Seq)
			}
		}
	}
	if killedInStream && messages != 1 {
		return fmt.Errorf("demo: step 1 stored %d assistant messages, want 1", messages)
	}
	return nil
}

// printDescription prints the Describe query's phase, handle and cursor.
func printDescription(ctx context.Context, w io.Writer, c *client.Client, id string) error {
	d, err := c.Describe(ctx, id)
	if err != nil {
		return err
	}
	handle := "none"
	if d.Handle != nil {
		handle = d.Handle.HandleID
	}
	entries := make([]string, len(d.Lifecycle))
	for i, e := range d.Lifecycle {
		entries[i] = e.Type
		if e.Source != "" {
			entries[i] += "{" + e.Source + "}"
		}
	}
	_, err = fmt.Fprintf(w, "phase %s, handle %s, next seq %d, lifecycle %v\n", d.Phase, handle, d.NextSeq, entries)
	return err
}

// readAll reads a session's whole log through a read handle.
func readAll(ctx context.Context, st *jsonl.Store, id string) ([]session.Event, error) {
	h, err := st.Open(ctx, id, jsonl.AccessRead, jsonl.OpenOptions{})
	if err != nil {
		return nil, err
	}
	defer h.Close(ctx)
	return h.Read(ctx, 0, -1)
}

// printLog prints the header line and every event of a session.
func printLog(ctx context.Context, w io.Writer, st *jsonl.Store, id string) error {
	n, err := writeLog(ctx, w, st, id)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "\n%d events, seqs 0..%d contiguous\n", n, n-1)
	return err
}
