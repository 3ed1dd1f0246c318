package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/stretchr/testify/require"
	"go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/wire"
)

// terminal is `starter chat` running on a pseudo-terminal, as a person runs
// it: what it prints is read from the terminal's master side, and keys are
// written to it (Enter is "\r", Ctrl-C is "\x03": the terminal's line
// discipline turns it into SIGINT while the chat is in cooked mode).
type terminal struct {
	t      *testing.T
	cmd    *exec.Cmd
	master *os.File
	out    *syncBuffer
	// seen is how far expect has matched.
	seen   int
	exited chan struct{}
	err    error
}

func (e *env) chat(args ...string) *terminal {
	return e.onTerminal(append([]string{"chat"}, args...)...)
}

// onTerminal runs the starter command args on a pseudo-terminal, against
// the worker's server.
func (e *env) onTerminal(args ...string) *terminal {
	full := append(args, "--address", fmt.Sprintf("127.0.0.1:%d", e.port), "--namespace", e.namespace, "--task-queue", e.taskQueue)
	cmd := exec.CommandContext(e.ctx, bin.starter, full...)
	master, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 200})
	require.NoError(e.t, err)
	term := &terminal{t: e.t, cmd: cmd, master: master, out: &syncBuffer{}, exited: make(chan struct{})}
	go func() { _, _ = io.Copy(term.out, master) }()
	go func() {
		term.err = cmd.Wait()
		close(term.exited)
	}()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-term.exited
		master.Close()
	})
	return term
}

// expect waits until the terminal shows want after what was matched before.
func (term *terminal) expect(want string) {
	term.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		out := term.out.String()
		if i := strings.Index(out[term.seen:], want); i >= 0 {
			term.seen += i + len(want)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	term.t.Fatalf("the terminal never showed %q; it shows:\n%s", want, term.out.String()[term.seen:])
}

// typeKeys writes keys to the terminal.
func (term *terminal) typeKeys(keys string) {
	term.t.Helper()
	_, err := term.master.Write([]byte(keys))
	require.NoError(term.t, err)
}

// wait waits for the chat to exit.
func (term *terminal) wait() error {
	select {
	case <-term.exited:
		return term.err
	case <-time.After(90 * time.Second):
		term.t.Fatalf("the chat did not exit; it shows:\n%s", term.out.String())
		return nil
	}
}

// A person chats: the answer streams, a tool call shows as one line, Ctrl-C
// cancels a stalled turn (it ends aborted), /inject and /steer reach the
// agent, /history shows the conversation, and Ctrl-C at the prompt leaves,
// disposing the session.
func TestChatOnATerminal(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	cwd := filepath.Join(dir, "work")
	require.NoError(t, os.MkdirAll(cwd, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(cwd, "a.txt"), []byte("alpha\n"), 0o644))
	script := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[
		{"text":"Let me read it.","chunkSize":4,"toolCalls":[{"id":"c1","name":"read_file","arguments":{"path":"a.txt"}}]},
		{"text":"The file says alpha.","chunkSize":5},
		{"text":"Thinking very hard","chunkSize":4,"stall":{"afterChunks":2}},
		{"text":"The number is 7."}
	]}`), 0o644))
	e.workerArgs = []string{"--provider-script", script}
	e.startWorker(true)

	term := e.chat("--id", "c1", "--cwd", cwd, "--provider", "scripted", "--model", "m1", "--root", e.root, "--compression", "none")
	term.expect(`session "c1" created`)
	term.expect("> ")
	term.typeKeys("what is in a.txt?\r")
	term.expect("Let me read it.")
	term.expect(`⚙ read_file {"path":"a.txt"} → ok (6 bytes)`)
	term.expect("The file says alpha.")
	term.expect("[turn 1 completed]")

	term.expect("> ")
	term.typeKeys("think about it\r")
	term.expect("Thin")
	term.typeKeys("\x03")
	term.expect("^C cancelling the turn")
	term.expect("[turn 2 aborted by user]")

	term.expect("> ")
	term.typeKeys("/inject remember the number 7\r")
	term.expect("stored (seq ")
	term.expect("> ")
	term.typeKeys("/steer what is the number?\r")
	term.expect("The number is 7.")
	term.expect("[turn 3 completed]")

	term.expect("> ")
	term.typeKeys("/history\r")
	for _, want := range []string{
		"you: what is in a.txt?",
		"assistant: Let me read it.",
		`⚙ read_file {"path":"a.txt"} → ok (6 bytes)`,
		"assistant: The file says alpha.",
		"you: think about it",
		"you: remember the number 7",
		"you: what is the number?",
		"assistant: The number is 7.",
	} {
		term.expect(want)
	}
	term.expect("> ")
	term.typeKeys("\x03")
	term.expect(`session "c1" disposed`)
	require.NoError(t, term.wait(), term.out.String())

	// The session is disposed: its workflow completed, its log closed.
	tc, err := client.Dial(client.Options{HostPort: fmt.Sprintf("127.0.0.1:%d", e.port), Namespace: e.namespace})
	require.NoError(t, err)
	defer tc.Close()
	d, err := tc.DescribeWorkflow(context.Background(), wire.WorkflowID("c1"), "")
	require.NoError(t, err)
	require.Equal(t, enums.WORKFLOW_EXECUTION_STATUS_COMPLETED, d.RawResponse.GetWorkflowExecutionInfo().GetStatus())
	st, err := jsonl.NewStore(jsonl.Options{Root: e.root, Compression: jsonl.CompressionNone})
	require.NoError(t, err)
	lease, err := st.LeaseOf(context.Background(), "c1")
	require.NoError(t, err)
	require.Nil(t, lease)

	evs := e.stored("c1")
	requireContiguous(t, evs)
	var ends []string
	for _, ev := range evs {
		if ev.Type == wire.TypeTurnEnd {
			end, err := ev.TurnEnd()
			require.NoError(t, err)
			ends = append(ends, end.Reason.Kind)
		}
	}
	require.Equal(t, []string{"completed", "aborted", "completed"}, ends)
}

// Ctrl-C twice quickly during a turn leaves: the session is disposed, its
// running turn ended by the dispose.
func TestChatLeavesOnDoubleCtrlC(t *testing.T) {
	e := newEnv(t)
	script := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[{"text":"Thinking very hard","chunkSize":4,"stall":{"afterChunks":2}}]}`), 0o644))
	e.workerArgs = []string{"--provider-script", script}
	e.startWorker(true)

	term := e.chat("--id", "c2", "--provider", "scripted", "--model", "m1", "--root", e.root, "--compression", "none")
	term.expect("> ")
	term.typeKeys("hello\r")
	term.expect("Thin")
	term.typeKeys("\x03")
	term.expect("^C cancelling the turn")
	term.typeKeys("\x03")
	term.expect(`session "c2" disposed`)
	require.NoError(t, term.wait(), term.out.String())

	evs := e.stored("c2")
	requireContiguous(t, evs)
	last := evs[len(evs)-1]
	require.Equal(t, wire.TypeTurnEnd, last.Type)
	end, err := last.TurnEnd()
	require.NoError(t, err)
	require.Equal(t, "aborted", end.Reason.Kind)
	var exit *exec.ExitError
	require.False(t, errors.As(term.err, &exit))
}

// Input that is not a terminal is read line by line: each prompt's turn is
// followed to its end before the next line is read, and the end of the
// input leaves, disposing the session.
func TestChatReadsPipedInput(t *testing.T) {
	e := newEnv(t)
	script := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[{"text":"Hello there","chunkSize":3},{"text":"Still here"}]}`), 0o644))
	e.workerArgs = []string{"--provider-script", script}
	e.startWorker(true)

	out := e.mustStarter("hi\n/history\nagain", "chat", "--id", "p1", "--provider", "scripted", "--model", "m1", "--root", e.root, "--compression", "none")
	for _, want := range []string{
		`session "p1" created`,
		"Hello there\n[turn 1 completed]\n",
		"you: hi\nassistant: Hello there\n",
		"Still here\n[turn 2 completed]\n",
		`session "p1" disposed`,
	} {
		require.Contains(t, out, want)
	}
	evs := e.stored("p1")
	requireContiguous(t, evs)
	require.Equal(t, wire.TypeTurnEnd, evs[len(evs)-1].Type)
}

// The chat attaches to a live session (following a turn already running),
// /detach leaves it live, and a stored session that is not live is
// resumed.
func TestChatAttachesAndResumes(t *testing.T) {
	e := newEnv(t)
	script := filepath.Join(t.TempDir(), "script.json")
	require.NoError(t, os.WriteFile(script, []byte(`{"responses":[
		{"text":"Hello there"},
		{"text":"A slow answer, streamed.","chunkSize":2,"delayMs":250},
		{"text":"Back again."}
	]}`), 0o644))
	e.workerArgs = []string{"--provider-script", script}
	e.startWorker(true)
	e.mustStarter("", "create", "--id", "m1", "--provider", "scripted", "--model", "m1")
	e.mustStarter("", "turn", "--id", "m1", "--prompt", "hi")

	// A turn runs when the chat attaches: the chat follows it to its end.
	turnDone := make(chan error, 1)
	go func() {
		_, err := e.starter("", "turn", "--id", "m1", "--prompt", "slowly")
		turnDone <- err
	}()
	tc, err := client.Dial(client.Options{HostPort: fmt.Sprintf("127.0.0.1:%d", e.port), Namespace: e.namespace})
	require.NoError(t, err)
	defer tc.Close()
	require.Eventually(t, func() bool {
		v, err := tc.QueryWorkflow(context.Background(), wire.WorkflowID("m1"), "", wire.QueryLoopState)
		var st wire.LoopState
		return err == nil && v.Get(&st) == nil && st.State == "running"
	}, 60*time.Second, 50*time.Millisecond)
	out := e.mustStarter("/detach\n", "chat", "--id", "m1", "--root", e.root, "--compression", "none")
	require.NoError(t, <-turnDone)
	for _, want := range []string{
		`attached to live session "m1" (2 turns, agent running)`,
		"A slow answer, streamed.\n[turn 2 completed]\n",
		`detached; session "m1" stays live`,
	} {
		require.Contains(t, out, want)
	}
	require.Contains(t, e.mustStarter("", "describe", "--id", "m1", "--json"), `"phase": "live"`)

	e.mustStarter("", "dispose", "--id", "m1")
	// A resume takes the route again.
	out = e.mustStarter("again\n/quit\n", "chat", "--id", "m1", "--provider", "scripted", "--model", "m1", "--root", e.root, "--compression", "none")
	for _, want := range []string{
		`session "m1" resumed`,
		"Back again.\n[turn 3 completed]\n",
		`session "m1" disposed`,
	} {
		require.Contains(t, out, want)
	}
}
