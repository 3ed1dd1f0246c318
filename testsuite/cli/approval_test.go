package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// approvalScript writes a scripted model whose answers are, in order,
// responses (each a {"toolCalls"} or {"text"} object), and starts a worker
// that runs commands; it returns the project directory sessions work in.
func approvalScript(t *testing.T, e *env, responses ...any) string {
	t.Helper()
	dir := t.TempDir()
	project := filepath.Join(dir, "project")
	require.NoError(t, os.MkdirAll(project, 0o755))
	script, err := json.Marshal(map[string]any{"responses": responses})
	require.NoError(t, err)
	path := filepath.Join(dir, "script.json")
	require.NoError(t, os.WriteFile(path, script, 0o644))
	e.workerArgs = []string{"--provider-script", path, "--enable-run-command"}
	e.startWorker(true)
	return project
}

// runCommand is a model's run_command call.
func runCommand(id, command string) map[string]any {
	return map[string]any{"toolCalls": []any{map[string]any{"id": id, "name": "run_command", "arguments": map[string]string{"command": command}}}}
}

// answer is a model's text answer.
func answer(text string) map[string]any { return map[string]any{"text": text} }

// toolResults returns the code and text of each stored tool/result of
// the session, by call id ("ok" for no code).
func toolResults(t *testing.T, evs []session.Event) map[string]string {
	got := map[string]string{}
	for _, ev := range evs {
		if ev.Type != wire.TypeToolResult {
			continue
		}
		r, err := ev.ToolResult()
		require.NoError(t, err)
		code := "ok"
		if r.Error != nil {
			code = r.Error.Code
		}
		got[r.Message.Source.CallID] = code + " " + r.Message.Content[0].Content[0].Text
	}
	return got
}

// countType counts the session's events of type typ.
func countType(evs []session.Event, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

// A person runs a session whose approval policy is ask, through the
// binaries: the model's run_command waits; `starter approvals` lists it,
// `starter approve` runs it (the file it writes is there) and a second
// approve of the same call is refused with the outcome that stands;
// `starter reject` gives the model the rejected result and the command
// never runs; `approve --always` adds the rule under which the next
// similar command runs without asking; `starter permissions` shows and
// changes the policy between turns.
func TestApprovalsThroughTheCLI(t *testing.T) {
	e := newEnv(t)
	project := approvalScript(t, e,
		runCommand("c1", "echo approved > approved.txt"), answer("Wrote it."),
		runCommand("c2", "echo rejected > rejected.txt"), answer("Not written."),
		runCommand("c3", "echo always once"), runCommand("c4", "echo always twice"), answer("Echoed twice."),
	)
	e.mustStarter("", "create", "--id", "a1", "--cwd", project, "--provider", "scripted", "--model", "m1", "--approval-policy", "ask")
	require.Contains(t, e.mustStarter("", "permissions", "--id", "a1"), "approval policy   ask\n")
	require.Equal(t, "no tool call of session \"a1\" waits for approval\n", e.mustStarter("", "approvals", "--id", "a1"))

	// turn runs `starter turn` in the background: what it printed so far
	// is in the buffer, its whole output comes on the channel when the
	// turn has ended.
	turn := func(prompt string) (*syncBuffer, <-chan string) {
		out := &syncBuffer{}
		done := make(chan string, 1)
		cmd := exec.CommandContext(e.ctx, bin.starter, "turn", "--id", "a1", "--prompt", prompt, "--root", e.root, "--compression", "none",
			"--address", fmt.Sprintf("127.0.0.1:%d", e.port), "--namespace", e.namespace, "--task-queue", e.taskQueue)
		var errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = out, &errb
		require.NoError(t, cmd.Start())
		go func() {
			if err := cmd.Wait(); err != nil {
				done <- out.String() + "\nERROR: " + err.Error() + ": " + errb.String()
				return
			}
			done <- out.String()
		}()
		return out, done
	}
	// ended waits for the turn's end: at most 90 seconds, so a call left
	// waiting fails the test by name.
	ended := func(progress *syncBuffer, done <-chan string) string {
		select {
		case out := <-done:
			return out
		case <-time.After(90 * time.Second):
			t.Fatalf("the turn did not end; it shows:\n%s\napprovals:\n%s", progress, e.mustStarter("", "approvals", "--id", "a1"))
			return ""
		}
	}
	// asked waits until the turn shows that call waits for approval, and
	// returns what `starter approvals` lists then.
	asked := func(out *syncBuffer, call string) string {
		require.Eventually(t, func() bool { return strings.Contains(out.String(), "("+call+") waits for approval") },
			90*time.Second, 50*time.Millisecond, "the turn never showed the call waiting; it shows:\n%s\n%s", out, e.logs())
		return e.mustStarter("", "approvals", "--id", "a1")
	}

	// Approved: it runs.
	progress, done := turn("write approved.txt")
	out := asked(progress, "c1")
	require.Contains(t, out, "call c1 (run_command): run_command requires approval in this session\n  arguments: {\"command\":\"echo approved > approved.txt\"}\n  asked ")
	require.Contains(t, out, "decide with: starter approve --id a1 --call CALLID [--always], or starter reject --id a1 --call CALLID\n")
	_, err := os.Stat(filepath.Join(project, "approved.txt"))
	require.True(t, os.IsNotExist(err), "the command ran before it was approved")
	require.Equal(t, "allowed call c1 (run_command) once\n", e.mustStarter("", "approve", "--id", "a1"))
	out = ended(progress, done)
	require.Contains(t, out, "⏸ run_command (c1) waits for approval: run_command requires approval in this session\n  {\"command\":\"echo approved > approved.txt\"}\n  starter approve --id a1 --call c1 [--always], or starter reject --id a1 --call c1\n")
	require.True(t, strings.HasSuffix(out, "✓ run_command (c1)\nWrote it.\nturn 1 completed\n"), "output:\n%s", out)
	require.LessOrEqual(t, strings.Count(out, "→ run_command (c1)"), 1, "the call was reported started twice:\n%s", out)
	b, err := os.ReadFile(filepath.Join(project, "approved.txt"))
	require.NoError(t, err)
	require.Equal(t, "approved\n", string(b))

	// The same call again: settled, and how.
	_, err = e.starter("", "approve", "--id", "a1", "--call", "c1")
	require.Error(t, err)
	require.Contains(t, err.Error(), `(call "c1") is settled already: allowed-once`)
	_, err = e.starter("", "reject", "--id", "a1", "--call", "nope")
	require.Error(t, err)
	require.Contains(t, err.Error(), `no approval "" (call "nope") is waiting in this session`)

	// Rejected: the model is told, the command never runs.
	progress, done = turn("write rejected.txt")
	require.Contains(t, asked(progress, "c2"), "call c2 (run_command)")
	require.Equal(t, "rejected call c2 (run_command)\n", e.mustStarter("", "reject", "--id", "a1", "--call", "c2"))
	out = ended(progress, done)
	require.True(t, strings.HasSuffix(out, "✗ run_command (c2) APPROVAL_REJECTED\nNot written.\nturn 2 completed\n"), "output:\n%s", out)
	_, err = os.Stat(filepath.Join(project, "rejected.txt"))
	require.True(t, os.IsNotExist(err), "a rejected command ran")
	_, err = e.starter("", "approve", "--id", "a1", "--call", "c2")
	require.Error(t, err)
	require.Contains(t, err.Error(), `(call "c2") is settled already: rejected`)

	// Always: the rule lets the next "echo always" run without asking.
	progress, done = turn("echo twice")
	require.Contains(t, asked(progress, "c3"), "call c3 (run_command)")
	require.Equal(t, "allowed call c3 (run_command); from now on allowed without asking: run_command: commands starting \"echo always\"\n",
		e.mustStarter("", "approve", "--id", "a1", "--always"))
	out = ended(progress, done)
	require.True(t, strings.HasSuffix(out, "Echoed twice.\nturn 3 completed\n"), "output:\n%s", out)
	require.NotContains(t, out, "(c4) waits for approval")

	evs := e.stored("a1")
	requireContiguous(t, evs)
	results := toolResults(t, evs)
	require.Equal(t, "ok [exit code: 0]", results["c1"])
	require.Equal(t, `APPROVAL_REJECTED Error: the user rejected tool "run_command"`, results["c2"])
	require.Equal(t, "ok always once\n[exit code: 0]", results["c3"])
	require.Equal(t, "ok always twice\n[exit code: 0]", results["c4"])
	require.Equal(t, 3, countType(evs, wire.TypeApprovalAsked), "c4 asked")
	require.Equal(t, 3, countType(evs, wire.TypeApprovalDecided))

	// The permissions hold the rule; between turns the policy changes.
	require.Contains(t, e.mustStarter("", "permissions", "--id", "a1"), "allow rules       run_command: commands starting \"echo always\"\n")
	out = e.mustStarter("", "permissions", "--id", "a1", "--approval-policy", "never", "--allow-path", "src")
	require.Contains(t, out, "approval policy   never\n")
	require.Contains(t, out, "allow rules       run_command: commands starting \"echo always\"\n                  write_file: paths under src\n")
	var perms wire.Permissions
	require.NoError(t, json.Unmarshal([]byte(e.mustStarter("", "permissions", "--id", "a1", "--json")), &perms))
	require.Equal(t, wire.Permissions{SandboxMode: "workspace-write", ApprovalPolicy: "never",
		Rules: []wire.ApprovalRule{{Tool: "run_command", CommandPrefix: "echo always"}, {Tool: "write_file", PathPrefix: "src"}}}, perms)
	e.mustStarter("", "dispose", "--id", "a1")
}

// A person chats with a session created asking: each command the model
// wants to run is shown and asked about; y runs it, n rejects it (the
// model is told, the command never runs); /permissions shows and switches
// the policy.
func TestChatAnswersApprovalsOnATerminal(t *testing.T) {
	e := newEnv(t)
	project := approvalScript(t, e,
		runCommand("c1", "echo yes > yes.txt"), answer("Wrote yes."),
		runCommand("c2", "echo no > no.txt"), answer("Did not write no."),
	)
	term := e.chat("--id", "ch1", "--cwd", project, "--provider", "scripted", "--model", "m1", "--approval-policy", "ask", "--root", e.root, "--compression", "none")
	term.expect(`session "ch1" created`)
	term.expect("> ")
	term.typeKeys("write yes\r")
	term.expect("⏸ run_command (c1) waits for your approval: run_command requires approval in this session\r\n")
	term.expect("  command: echo yes > yes.txt\r\n")
	term.expect("  [a]lways also allows from now on: run_command: commands starting \"echo yes\"\r\n")
	term.expect("Allow? [y]es / [n]o / [a]lways: ")
	term.typeKeys("y\r")
	term.expect("allowed call c1 (run_command) once")
	term.expect(`⚙ run_command {"command":"echo yes > yes.txt"} → ok`)
	term.expect("Wrote yes.")
	term.expect("[turn 1 completed]")

	term.expect("> ")
	term.typeKeys("write no\r")
	term.expect("⏸ run_command (c2) waits for your approval")
	term.expect("Allow? [y]es / [n]o / [a]lways: ")
	term.typeKeys("n\r")
	term.expect("rejected call c2 (run_command)")
	term.expect(`⚙ run_command {"command":"echo no > no.txt"} → error: the user rejected tool "run_command"`)
	term.expect("Did not write no.")
	term.expect("[turn 2 completed]")

	term.expect("> ")
	term.typeKeys("/permissions\r")
	term.expect("approval policy   ask")
	term.expect("> ")
	term.typeKeys("/permissions never\r")
	term.expect("approval policy never")
	term.expect("> ")
	term.typeKeys("\x03")
	term.expect(`session "ch1" disposed`)
	require.NoError(t, term.wait(), term.out.String())

	b, err := os.ReadFile(filepath.Join(project, "yes.txt"))
	require.NoError(t, err)
	require.Equal(t, "yes\n", string(b))
	_, err = os.Stat(filepath.Join(project, "no.txt"))
	require.True(t, os.IsNotExist(err), "a rejected command ran")
	evs := e.stored("ch1")
	requireContiguous(t, evs)
	results := toolResults(t, evs)
	require.Equal(t, "ok [exit code: 0]", results["c1"])
	require.Equal(t, `APPROVAL_REJECTED Error: the user rejected tool "run_command"`, results["c2"])
	require.Equal(t, 2, countType(evs, wire.TypeApprovalDecided))
}
